package catalog_test

import (
	"latent.dev/admission/catalog"
	"latent.dev/admission/core"
)

// A pin vouches for the identities it holds, so admission does not scan
// them twice.
var _ core.ValidatedRevisionSource = (*catalog.Pin)(nil)
