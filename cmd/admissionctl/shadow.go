package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"text/tabwriter"

	"latent.dev/admission/catalog"
	"latent.dev/admission/internal/printable"
	"latent.dev/admission/internal/shadow"
	"latent.dev/admission/internal/trace"
	"latent.dev/admission/policy"
)

func init() {
	commands["shadow"] = runShadow
}

const shadowUsage = "usage: admissionctl shadow -policy NEW.json [-catalog CATALOG.json] [-report FILE.html] TRACE..."

// shadowArgs are the flags and files of `admissionctl shadow`.
type shadowArgs struct {
	policy, catalog, report string
	files                   []string
}

// parseShadowArgs parses the flags, given before, between or after the
// trace files; each at most once.
func parseShadowArgs(flags *flag.FlagSet, args []string) (shadowArgs, error) {
	var a shadowArgs
	var policyFlag, catalogFlag, reportFlag onceString
	flags.Var(&policyFlag, "policy", "the candidate node policy `FILE`")
	flags.Var(&catalogFlag, "catalog", "replay every decision in this catalog `FILE` instead of the trace's")
	flags.Var(&reportFlag, "report", "also write the HTML report to `FILE.html`")
	files, err := parseArgs(flags, args)
	if err != nil {
		return a, err
	}
	for _, f := range []struct {
		name string
		flag *onceString
	}{{"policy", &policyFlag}, {"catalog", &catalogFlag}, {"report", &reportFlag}} {
		if err := f.flag.check(f.name); err != nil {
			return a, err
		}
	}
	a = shadowArgs{policy: policyFlag.value, catalog: catalogFlag.value, report: reportFlag.value, files: files}
	switch {
	case a.policy == "":
		return a, errors.New("no -policy")
	case len(a.files) == 0:
		return a, errors.New("no TRACE file")
	}
	return a, nil
}

// runShadow replays trace files under a candidate policy and prints what
// would change: the refusals per tenant and reason, the first changed
// decisions and a summary line; -report writes the HTML page too.
func runShadow(args []string, stdout, stderr io.Writer) int {
	flags := newFlagSet("shadow")
	a, err := parseShadowArgs(flags, args)
	if err != nil {
		return flagMisuse(stderr, flags, err, shadowUsage)
	}
	data, err := readInput(a.policy)
	if err != nil {
		printUnreadable(stderr, a.policy, err)
		return exitUnreadable
	}
	cand, err := policy.DecodePolicy(data)
	if err != nil {
		fmt.Fprintf(stderr, "%s: the candidate policy is not valid:\n", printable.String(a.policy))
		printProblems(stderr, err)
		return exitProblems
	}
	cfg := shadow.Config{Policy: cand, Files: a.files}
	if a.catalog != "" {
		data, err := readInput(a.catalog)
		if err != nil {
			printUnreadable(stderr, a.catalog, err)
			return exitUnreadable
		}
		f, err := catalog.ValidateFile(data, cand)
		if err != nil {
			fmt.Fprintf(stderr, "%s: the catalog is not valid:\n", printable.String(a.catalog))
			printProblems(stderr, err)
			return exitProblems
		}
		cfg.Catalog = &f
	}
	// The report's file is opened before the replay, so that a path that
	// cannot be written fails at once, not after the whole trace.
	var report *reportFile
	if a.report != "" {
		if report, err = openReport(a.report); err != nil {
			fmt.Fprintf(stderr, "admissionctl shadow: the report: %s\n", printable.String(err.Error()))
			return exitUnreadable
		}
		defer report.abandon()
	}
	res, err := shadow.Replay(cfg)
	if err != nil {
		var le *trace.LineError
		var pe *fs.PathError
		switch {
		case errors.As(err, &le):
			fmt.Fprintf(stderr, "%s:%d: %s\n", printable.String(le.File), le.Line, printable.String(le.Err.Error()))
			return exitProblems
		case errors.As(err, &pe):
			printUnreadable(stderr, pe.Path, err)
			return exitUnreadable
		}
		fmt.Fprintf(stderr, "admissionctl shadow: %s\n", printable.String(err.Error()))
		return exitProblems
	}
	printShadow(stdout, res)
	if report != nil {
		if err := report.write(res); err != nil {
			fmt.Fprintf(stderr, "admissionctl shadow: the report: %s\n", printable.String(err.Error()))
			return exitUnreadable
		}
	}
	return exitOK
}

// reportFile is the -report file, opened for writing before the replay.
type reportFile struct {
	f       *os.File
	created bool // it did not exist: abandon removes it
	done    bool
}

// openReport opens path for writing without truncating it yet.
func openReport(path string) (*reportFile, error) {
	_, statErr := os.Lstat(path)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	return &reportFile{f: f, created: errors.Is(statErr, fs.ErrNotExist)}, nil
}

// write replaces the file's content with res's report and closes it.
func (r *reportFile) write(res *shadow.Result) error {
	r.done = true
	err := r.f.Truncate(0)
	if err == nil {
		err = shadow.WriteReport(r.f, res)
	}
	if e := r.f.Close(); err == nil {
		err = e
	}
	return err
}

// abandon closes a report never written, removing the file it created.
func (r *reportFile) abandon() {
	if r.done {
		return
	}
	_ = r.f.Close()
	if r.created {
		_ = os.Remove(r.f.Name())
	}
}

// printShadow prints the refusal table, the changed decisions and the
// summary line.
func printShadow(w io.Writer, res *shadow.Result) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "tenant\treason\trecorded\tcandidate")
	for _, r := range res.Refusals {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", printable.String(r.Tenant), printable.String(r.Reason), r.Recorded, r.Candidate)
	}
	tw.Flush()
	if len(res.Changes) > 0 {
		fmt.Fprintf(w, "\nchanged decisions (the first %d of %d):\n", len(res.Changes), res.Changed)
		for _, c := range res.Changes {
			fmt.Fprintf(w, "%s order %d %s/%s/%s activation %s: recorded %s, candidate %s\n",
				c.Time.UTC().Format(shadow.TimeFormat), c.Order, printable.String(c.Tenant), printable.String(c.Service),
				printable.String(c.Route), printable.String(c.ActivationID),
				printable.String(c.Recorded.String()), printable.String(c.Candidate.String()))
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, printable.String(res.Summary()))
}
