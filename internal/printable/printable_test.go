package printable_test

import (
	"testing"

	"go.uber.org/goleak"

	"latent.dev/admission/internal/printable"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestString(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain text: \"quoted\" \\ ok", "plain text: \"quoted\" \\ ok"},
		{"two\nlines", `two\nlines`},
		{"\x1b]0;title\x07", `\u001b]0;title\u0007`},
		{"rtl\u202e", `rtl\u202e`},
		{"é ✓", "é ✓"},
		{"\xff", `\ufffd`},
	} {
		if got := printable.String(c.in); got != c.want {
			t.Errorf("String(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
