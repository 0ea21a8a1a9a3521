package main

import (
	"fmt"
	"io"

	"latent.dev/admission/policy"
)

func init() {
	validators["policy"] = validatePolicy
}

// validatePolicy prints ok, or one `path: message` line per problem.
func validatePolicy(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: admissionctl validate policy FILE")
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
