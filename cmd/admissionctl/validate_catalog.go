package main

import (
	"fmt"
	"io"
	"strings"

	"latent.dev/admission/catalog"
	"latent.dev/admission/internal/strictjson"
	"latent.dev/admission/policy"
)

func init() {
	validators["catalog"] = validateCatalog
}

const validateCatalogUsage = "usage: admissionctl validate catalog FILE [--policy FILE]"

// validateCatalog prints ok, or one `path: message` line per problem. With
// --policy it also checks the catalog against that node policy; problems
// in the policy file itself are printed prefixed with its name.
func validateCatalog(args []string, stdout, stderr io.Writer) int {
	file, policyFile, ok := catalogArgs(args)
	if !ok {
		fmt.Fprintln(stderr, validateCatalogUsage)
		return exitMisuse
	}
	var node *policy.NodeAdmissionPolicy
	if policyFile != "" {
		data, err := readInput(policyFile)
		if err != nil {
			printUnreadable(stderr, policyFile, err)
			return exitUnreadable
		}
		if node, err = policy.DecodePolicy(data); err != nil {
			fmt.Fprintf(stdout, "%s: the node policy is not valid:\n", strictjson.Printable(policyFile))
			printProblems(stdout, err)
			return exitProblems
		}
	}
	data, err := readInput(file)
	if err != nil {
		printUnreadable(stderr, file, err)
		return exitUnreadable
	}
	if _, err := catalog.ValidateFile(data, node); err != nil {
		printProblems(stdout, err)
		return exitProblems
	}
	fmt.Fprintln(stdout, "ok")
	return exitOK
}

// catalogArgs accepts FILE and --policy FILE (or --policy=FILE) in either
// order.
func catalogArgs(args []string) (file, policyFile string, ok bool) {
	sawPolicy := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--policy" || a == "-policy":
			if i+1 >= len(args) || sawPolicy {
				return "", "", false
			}
			i++
			sawPolicy, policyFile = true, args[i]
		case strings.HasPrefix(a, "--policy=") || strings.HasPrefix(a, "-policy="):
			if sawPolicy {
				return "", "", false
			}
			sawPolicy, policyFile = true, a[strings.IndexByte(a, '=')+1:]
		case strings.HasPrefix(a, "-") && a != "-":
			return "", "", false
		default:
			if file != "" {
				return "", "", false
			}
			file = a
		}
	}
	return file, policyFile, file != "" && (!sawPolicy || policyFile != "")
}
