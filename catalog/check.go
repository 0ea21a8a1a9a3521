package catalog

import (
	"fmt"
	"slices"

	"latent.dev/admission/internal/strictjson"
	"latent.dev/admission/policy"
)

// ValidateFile decodes and validates a catalog file as a store requires it
// (capacity included) and, when p is not nil, also checks it against the
// node policy p (see [checkNodePolicy]). The error, if any, is a
// [latent.dev/admission/problems.List] listing every problem with its JSON path.
func ValidateFile(data []byte, p *policy.NodeAdmissionPolicy) (File, error) {
	tree, parseProblems := strictjson.Parse(data)
	if tree == nil {
		return File{}, parseProblems
	}
	d := strictjson.NewDecoder(parseProblems)
	f := decodeCatalogValue(d, tree, true)
	problems := d.Problems()
	if p != nil {
		for _, np := range checkNodePolicy(f, p) {
			if !covered(np.Path, problems) {
				problems = append(problems, np)
			}
		}
	}
	if len(problems) > 0 {
		return File{}, problems
	}
	return f, nil
}

// checkNodePolicy reports what in a catalog file a node running policy p
// could never admit: a trust class p does not configure, a backend or
// state model the node does not offer, and a caller-chosen name (tenant,
// service, route, contract, function) that breaks the node's identifier
// rules. Paths are relative to the catalog file's root. Features and
// placement are left to admission, which reports them per request.
func checkNodePolicy(f File, p *policy.NodeAdmissionPolicy) strictjson.Problems {
	c := &nodeCheck{p: p}
	for i := range f.Deployments {
		c.deployment(strictjson.Index("deployments", i), &f.Deployments[i])
	}
	return c.problems
}

// ValidateDeployment decodes and validates one deployment, the body of a
// deploy request (docs/catalog-format.md, one element of `deployments`),
// and, when p is not nil, checks it against the node policy p as
// [ValidateFile] does. The error, if any, is a [latent.dev/admission/problems.List] listing
// every problem with its JSON path relative to the deployment: the
// deployment itself is the empty path, its first route `routes[0]`.
// Whether the catalog has room for it is the catalog's to say when it is
// deployed ([ErrCapacityExceeded]).
func ValidateDeployment(data []byte, p *policy.NodeAdmissionPolicy) (Deployment, error) {
	tree, parseProblems := strictjson.Parse(data)
	if tree == nil {
		return Deployment{}, parseProblems
	}
	d := strictjson.NewDecoder(parseProblems)
	dep := decodeDeploymentValue(d, tree)
	problems := d.Problems()
	if p != nil {
		c := &nodeCheck{p: p}
		c.deployment("", &dep)
		for _, np := range c.problems {
			if !covered(np.Path, problems) {
				problems = append(problems, np)
			}
		}
	}
	if len(problems) > 0 {
		return Deployment{}, problems
	}
	return dep, nil
}

// deployment checks one deployment whose path is path.
func (c *nodeCheck) deployment(path string, dep *Deployment) {
	c.name(strictjson.JoinKey(path, "tenant"), dep.Tenant)
	c.name(strictjson.JoinKey(path, "service"), dep.Service)
	for j := range dep.Routes {
		rt := &dep.Routes[j]
		rp := strictjson.Index(strictjson.JoinKey(path, "routes"), j)
		c.name(rp+".route", rt.Name)
		c.name(rp+".contract", rt.Contract)
		c.name(rp+".function", rt.Function)
		for k := range rt.Revisions {
			c.revision(strictjson.Index(rp+".revisions", k)+".policy", &rt.Revisions[k].Policy)
		}
	}
}

type nodeCheck struct {
	p        *policy.NodeAdmissionPolicy
	problems strictjson.Problems
}

func (c *nodeCheck) problem(path, message string) {
	c.problems = append(c.problems, strictjson.Problem{Path: path, Message: message})
}

func (c *nodeCheck) name(path, s string) {
	max := c.p.Node.MaximumIdentifierBytes
	if max != 0 && !policy.ValidIdentifier(s, max) {
		c.problems = append(c.problems, strictjson.Problem{Path: path,
			Message: fmt.Sprintf("is not a valid identifier on this node (1 to %d bytes of UTF-8 without white space or control characters)", max)})
	}
}

func (c *nodeCheck) revision(path string, rp *policy.RevisionPolicy) {
	if !slices.ContainsFunc(c.p.TrustClasses, func(t policy.TrustClassPolicy) bool { return t.Name == rp.TrustClass }) {
		c.problem(path+".trust_class", "is not a trust class of the node policy")
	}
	if !slices.Contains(c.p.Node.Backends, rp.Backend) {
		c.problem(path+".backend", "is not a backend of the node (node.backends)")
	}
	if !slices.Contains(c.p.Node.StateModels, rp.StateModel) {
		c.problem(path+".state_model", "is not a state model of the node (node.state_models)")
	}
}
