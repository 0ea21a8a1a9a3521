package fleet

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The operator's side of the keys (admissionctl fleet): set, read and
// list fleet limits, and read the slices the nodes hold.

// NodeSlice is one node's slice of a tenant's limit as etcd holds it.
// Problem is set, and Has and Wants are 0, when the value does not decode.
type NodeSlice struct {
	Node       string
	Has, Wants int64
	Problem    string
}

// TenantLimit is one tenant's fleet limit and its slices. Limit is -1 when
// no limit key is set; Problem is set when its value does not decode.
type TenantLimit struct {
	Tenant  string
	Limit   int64
	Problem string
	Slices  []NodeSlice
}

// SetLimit writes tenant's fleet limit under prefix (the default when
// empty). The tenant's name must be a valid key segment and the limit in
// [0, 10⁹].
func SetLimit(ctx context.Context, c *clientv3.Client, prefix, tenant string, limit int64) error {
	if !validSegment(tenant) {
		return fmt.Errorf("%w: tenant %q: a name must be non-empty, printable and hold no '/'", ErrConfig, tenant)
	}
	if limit < 0 || limit > maxLimit {
		return fmt.Errorf("%w: limit %d: must be in [0, %d]", ErrConfig, limit, maxLimit)
	}
	if _, err := c.Put(ctx, LimitKey(prefix, tenant), strconv.FormatInt(limit, 10)); err != nil {
		return fmt.Errorf("fleet: setting %q: %w", LimitKey(prefix, tenant), err)
	}
	return nil
}

// GetLimit reads tenant's limit and slices at one revision.
func GetLimit(ctx context.Context, c *clientv3.Client, prefix, tenant string) (TenantLimit, error) {
	if !validSegment(tenant) {
		return TenantLimit{}, fmt.Errorf("%w: tenant %q: a name must be non-empty, printable and hold no '/'", ErrConfig, tenant)
	}
	all, err := ListLimits(ctx, c, prefix, tenant)
	if err != nil {
		return TenantLimit{}, err
	}
	for _, t := range all {
		if t.Tenant == tenant {
			return t, nil
		}
	}
	return TenantLimit{Tenant: tenant, Limit: -1}, nil
}

// ListLimits reads every tenant's limit and slices at one revision, in
// the tenants' order; only is one tenant to read, "" all of them. A tenant
// with slices but no limit key is listed with Limit -1.
func ListLimits(ctx context.Context, c *clientv3.Client, prefix, only string) ([]TenantLimit, error) {
	if prefix == "" {
		prefix = "/latent/fleet/"
	}
	limits, slices := prefix+"limits/", prefix+"slices/"
	lk, sk := limits, slices
	if only != "" {
		lk, sk = limits+only, slices+only+"/"
	}
	var limitOp clientv3.Op
	if only != "" {
		limitOp = clientv3.OpGet(lk)
	} else {
		limitOp = clientv3.OpGet(lk, clientv3.WithPrefix())
	}
	resp, err := c.Txn(ctx).Then(limitOp, clientv3.OpGet(sk, clientv3.WithPrefix())).Commit()
	if err != nil {
		return nil, fmt.Errorf("fleet: reading %q: %w", prefix, err)
	}
	byTenant := map[string]*TenantLimit{}
	get := func(name string) *TenantLimit {
		t, ok := byTenant[name]
		if !ok {
			t = &TenantLimit{Tenant: name, Limit: -1}
			byTenant[name] = t
		}
		return t
	}
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		t := get(strings.TrimPrefix(string(kv.Key), limits))
		if n, err := decodeLimit(string(kv.Key), kv.Value); err != nil {
			t.Problem = err.Error()
		} else {
			t.Limit = n
		}
	}
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		tenant, node, ok := strings.Cut(strings.TrimPrefix(string(kv.Key), slices), "/")
		if !ok {
			continue
		}
		t := get(tenant)
		s := NodeSlice{Node: node}
		if v, err := decodeSlice(string(kv.Key), kv.Value); err != nil {
			s.Problem = err.Error()
		} else {
			s.Has, s.Wants = v.Has, v.Wants
		}
		t.Slices = append(t.Slices, s)
	}
	out := make([]TenantLimit, 0, len(byTenant))
	for _, t := range byTenant {
		sort.Slice(t.Slices, func(i, j int) bool { return t.Slices[i].Node < t.Slices[j].Node })
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tenant < out[j].Tenant })
	return out, nil
}
