package main

import (
	"fmt"
	"io"

	"latent.dev/admission/catalog"
	"latent.dev/admission/internal/printable"
	"latent.dev/admission/policy"
)

func init() {
	validators["catalog"] = validateCatalog
}

const validateCatalogUsage = "usage: admissionctl validate catalog FILE [--policy FILE]"

// validateCatalog prints ok, or one `path: message` line per problem. With
// --policy it also checks the catalog against that node policy; problems
// in the policy file itself are printed prefixed with its name. The flag
// may come before or after FILE.
func validateCatalog(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("validate catalog")
	var policyFlag onceString
	fs.Var(&policyFlag, "policy", "check the catalog against this node policy `FILE`")
	args, err := parseArgs(fs, args)
	if err == nil {
		err = policyFlag.check("policy")
	}
	if err != nil {
		return flagMisuse(stderr, fs, err, validateCatalogUsage)
	}
	if len(args) != 1 {
		fmt.Fprintln(stderr, validateCatalogUsage)
		return exitMisuse
	}
	file, policyFile := args[0], policyFlag.value
	var node *policy.NodeAdmissionPolicy
	if policyFile != "" {
		data, err := readInput(policyFile)
		if err != nil {
			printUnreadable(stderr, policyFile, err)
			return exitUnreadable
		}
		if node, err = policy.DecodePolicy(data); err != nil {
			fmt.Fprintf(stdout, "%s: the node policy is not valid:\n", printable.String(policyFile))
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
