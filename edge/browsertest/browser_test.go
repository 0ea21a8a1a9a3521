package browsertest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
)

// newBrowser starts headless Chromium at path with a fresh profile under
// dir and the flags this closed network needs (no QUIC, no background
// networking, component updates or sync), at 1280x800. The browser lives
// until ctx ends or the test does.
func newBrowser(t *testing.T, ctx context.Context, path, dir string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(filepath.Join(dir, "profile")),
		chromedp.WindowSize(1280, 800),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(allocCtx, chromedp.WithLogf(t.Logf))
	t.Cleanup(cancelBrowser)
	return bctx
}
