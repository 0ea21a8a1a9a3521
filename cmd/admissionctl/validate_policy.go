package main

import (
	"fmt"
	"io"
	"os"

	"latent.dev/admission/internal/strictjson"
	"latent.dev/admission/policy"
)

func init() {
	validators["policy"] = validatePolicy
}

// validatePolicy prints ok, or one `path: message` line per problem.
func validatePolicy(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: admissionctl validate policy FILE")
		return 2
	}
	data, err := os.ReadFile(args[0])
	if err != nil {
		fmt.Fprintf(stdout, "%s: %v\n", args[0], err)
		return 1
	}
	if _, err := policy.DecodePolicy(data); err != nil {
		printProblems(stdout, err)
		return 1
	}
	fmt.Fprintln(stdout, "ok")
	return 0
}

// printProblems prints one line per problem in err.
func printProblems(w io.Writer, err error) {
	for _, p := range strictjson.AsProblems(err) {
		fmt.Fprintln(w, p.String())
	}
}
