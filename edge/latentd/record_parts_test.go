package latentd

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"latent.dev/admission/catalog"
	"latent.dev/admission/internal/trace"
)

// manyRoutes is acme's echo deployment as service, with routes copies of
// its first route: about 430 bytes of JSON each.
func manyRoutes(t *testing.T, service string, routes int) catalog.Deployment {
	t.Helper()
	var base catalog.Deployment
	for _, d := range testDeployments(t) {
		if d.Tenant == "acme" && d.Service == "echo" {
			base = d
		}
	}
	require.NotEmpty(t, base.Routes)
	d := catalog.Deployment{Tenant: "acme", Service: service}
	for i := range routes {
		r := base.Routes[0]
		r.Name = fmt.Sprintf("r%05d", i)
		d.Routes = append(d.Routes, r)
	}
	return d
}

func TestACatalogAndADeploymentOverALineAreRecordedInParts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	var big []catalog.Deployment
	for i := range 4 {
		big = append(big, manyRoutes(t, fmt.Sprintf("big%d", i), 600))
	}
	tn := startNode(t, nodeOptions{mutate: func(c *Config) {
		c.RecordPath = path
		c.Capacity = catalog.GenerousCapacity
		c.Deployments = append(c.Deployments, big...)
	}})
	// A deployment under the 1 MiB deploy limit whose base64 is over the
	// reader's line limit.
	dep, err := catalog.EncodeDeployment(manyRoutes(t, "fresh", 1900))
	require.NoError(t, err)
	require.Greater(t, len(dep)*4/3, trace.MaxLineBytes)
	require.Less(t, len(dep), DefaultMaxDeploymentBytes)
	put := tn.do(http.MethodPut, "/v1/admin/deployments/acme/fresh", adminToken, dep)
	require.Equal(t, http.StatusOK, put.status, "%s", put.body)
	tn.shutdown()

	// Every line fits the reader's limit.
	f, err := os.Open(path)
	require.NoError(t, err)
	br := bufio.NewReaderSize(f, 4<<20)
	var parts int
	for {
		line, err := br.ReadString('\n')
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		assert.LessOrEqual(t, len(line)-1, trace.MaxLineBytes)
		if strings.Contains(line, `_parts":`) {
			parts++
		}
	}
	require.NoError(t, f.Close())
	assert.Greater(t, parts, 4, "the catalog and the deployment went in parts")

	// The reader puts them together.
	rd, err := trace.Open([]string{path}, 0)
	require.NoError(t, err)
	defer rd.Close()
	var cat, deploy *trace.Line
	for {
		l, err := rd.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		switch l.Kind {
		case trace.KindCatalog:
			cat = &l
		case trace.KindDeploy:
			deploy = &l
		}
	}
	assert.Empty(t, rd.Stats().Inexact())
	require.NotNil(t, cat)
	require.Greater(t, len(cat.Catalog.File)*4/3, trace.MaxLineBytes)
	file, err := catalog.DecodeCatalogFile(cat.Catalog.File, true)
	require.NoError(t, err)
	assert.Len(t, file.Deployments, len(testDeployments(t))+len(big))
	require.NotNil(t, deploy)
	d, err := catalog.ValidateDeployment(deploy.Change.Deployment, tn.node.cfg.Policy)
	require.NoError(t, err)
	assert.Len(t, d.Routes, 1900)
}
