package problems_test

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"latent.dev/admission/catalog"
	"latent.dev/admission/policy"
	"latent.dev/admission/problems"
)

// asList is what an embedder writes: errors.As into the public type.
func asList(t *testing.T, err error) problems.List {
	t.Helper()
	var ps problems.List
	if !errors.As(err, &ps) {
		t.Fatalf("error %T %q: errors.As finds no problems.List", err, err)
	}
	return ps
}

func has(ps problems.List, path, fragment string) bool {
	for _, p := range ps {
		if p.Path == path && strings.Contains(p.Message, fragment) {
			return true
		}
	}
	return false
}

func TestDecodersReturnTheExportedList(t *testing.T) {
	_, err := policy.DecodePolicy([]byte(`{"node": 1}`))
	if ps := asList(t, err); !has(ps, "node", "expected an object") {
		t.Errorf("policy problems %q lack node: expected an object", ps)
	}
	_, err = catalog.DecodeCatalogFile([]byte(`{"deployments": [{"tenant": 7}]}`), false)
	if ps := asList(t, err); !has(ps, "deployments[0].tenant", "expected a string") {
		t.Errorf("catalog problems %q lack deployments[0].tenant", ps)
	}
	wrapped := errors.Join(errors.New("context"), err)
	if got := problems.Of(wrapped); len(got) == 0 || got[0].Path == "" {
		t.Errorf("Of(wrapped) = %q, want the wrapped list", got)
	}
	if got := problems.Of(errors.New("plain")); len(got) != 1 || got[0].Path != "" || got[0].Message != "plain" {
		t.Errorf("Of(plain) = %q, want one problem without a path", got)
	}
	if problems.Of(nil) != nil {
		t.Error("Of(nil) is not nil")
	}
}

// firstDeployment is the first deployment of the committed example
// catalog, as a deploy request's body.
func firstDeployment(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile("../testdata/catalog/good.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct{ Deployments []map[string]any }
	if err := json.Unmarshal(data, &f); err != nil || len(f.Deployments) == 0 {
		t.Fatalf("good.json: %v", err)
	}
	return f.Deployments[0]
}

func TestValidateDeploymentPathsAreRelativeToTheBody(t *testing.T) {
	pdata, err := os.ReadFile("../testdata/policy/node.json")
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.DecodePolicy(pdata)
	if err != nil {
		t.Fatal(err)
	}
	dep := firstDeployment(t)
	body, _ := json.Marshal(dep)
	got, err := catalog.ValidateDeployment(body, nil)
	if err != nil {
		t.Fatalf("the example's first deployment: %v", err)
	}
	if got.Tenant != dep["tenant"] || got.Service != dep["service"] {
		t.Errorf("decoded %s/%s, want %v/%v", got.Tenant, got.Service, dep["tenant"], dep["service"])
	}

	// A structural problem, a rule and a node-policy problem, each at its
	// path under the body.
	dep["surprise"] = true
	rev := dep["routes"].([]any)[0].(map[string]any)["revisions"].([]any)[0].(map[string]any)
	rev["policy"].(map[string]any)["trust_class"] = "no-such-class"
	body, _ = json.Marshal(dep)
	_, err = catalog.ValidateDeployment(body, p)
	ps := asList(t, err)
	if !has(ps, "surprise", "") {
		t.Errorf("problems %q lack the unknown key at surprise", ps)
	}
	if !has(ps, "routes[0].revisions[0].policy.trust_class", "not a trust class") {
		t.Errorf("problems %q lack the node-policy problem", ps)
	}
	for _, pr := range ps {
		if strings.HasPrefix(pr.Path, "deployments") {
			t.Errorf("problem %q is framed in a catalog file", pr)
		}
	}
	// Without a node policy the node-policy check is skipped.
	delete(dep, "surprise")
	body, _ = json.Marshal(dep)
	if _, err := catalog.ValidateDeployment(body, nil); err != nil {
		t.Errorf("without a policy: %v", err)
	}
	if _, err := catalog.ValidateDeployment(body, p); !has(asList(t, err), "routes[0].revisions[0].policy.trust_class", "") {
		t.Errorf("with the policy: %v", err)
	}
	_, err = catalog.ValidateDeployment([]byte(`[1]`), p)
	if ps := asList(t, err); !has(ps, "", "expected an object") {
		t.Errorf("an array body: %q", ps)
	}
}

func TestProblemStringEscapes(t *testing.T) {
	p := problems.Problem{Path: "a\nb", Message: "x\u202ey"}
	if got, want := p.String(), `a\nb: x\u202ey`; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	list := problems.List{{Message: "one"}, {Path: "k", Message: "two"}}
	if got, want := list.Error(), "one\nk: two"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
