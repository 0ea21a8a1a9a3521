// Package browsertest holds the checks that need a real browser: they
// drive headless Chromium through github.com/chromedp/chromedp, which is
// why they live in the edge module and the main module never depends on
// it.
//
// The soak report check runs `go run ./cmd/stress -duration 5s -seed 42
// -report FILE` from the repository root, opens the page in Chromium,
// reads the numbers the charts and tables rendered and holds them against
// the text report the same run printed, checks that every chart rendered
// with a size and that the page fits 1280x800 and 390x844 without
// sideways scrolling, and saves full-page screenshots at both sizes under
// the test's temporary directory (and copies them to $LATENT_ARTIFACTS,
// or $OUT, when set).
//
// The tests skip, saying why, only when no browser can be found: Debian's
// chromium (which .ci/run installs), chromium-browser or google-chrome.
package browsertest
