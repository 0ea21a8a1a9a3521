package main

import (
	"fmt"
	"io"

	"latent.dev/admission/policy"
)

func init() {
	validators["policy"] = validatePolicy
}

const validatePolicyUsage = "usage: admissionctl validate policy FILE"

// validatePolicy prints ok, or one `path: message` line per problem.
func validatePolicy(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("validate policy")
	args, err := parseArgs(fs, args)
	if err != nil {
		return flagMisuse(stderr, fs, err, validatePolicyUsage)
	}
	if len(args) != 1 {
		fmt.Fprintln(stderr, validatePolicyUsage)
		return exitMisuse
	}
	data, err := readInput(args[0])
	if err != nil {
		printUnreadable(stderr, args[0], err)
		return exitUnreadable
	}
	if _, err := policy.DecodePolicy(data); err != nil {
		printProblems(stdout, err)
		return exitProblems
	}
	fmt.Fprintln(stdout, "ok")
	return exitOK
}
