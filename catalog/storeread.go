package catalog

import "bytes"

// decodeStore rebuilds a catalog view, and the highest generation the
// catalog had handed out, from store bytes. Every deployment goes through
// the same compilation (and so the same validation) as a Deploy; a store
// that fails any check yields no view at all.
func decodeStore(data []byte) (Capacity, *Pin, uint64, *formatError) {
	frames, ferr := readFrames(data)
	if ferr != nil {
		return Capacity{}, nil, 0, ferr
	}
	if len(frames) == 0 || frames[0].kind != recordHeader {
		return Capacity{}, nil, 0, formatFailure(0, ErrMalformed, "expected the header record")
	}
	hr := &reader{b: frames[0].payload}
	version := hr.uvarint()
	if version != storeVersion && version != storeVersion1 {
		return Capacity{}, nil, 0, formatFailure(0, ErrMalformed, "unsupported format version")
	}
	generation := hr.uvarint()
	issued := generation
	if version != storeVersion1 {
		issued = hr.uvarint()
	}
	capacity := Capacity{MaxRevisions: hr.uvarint(), MaxPolicyBytes: hr.uvarint()}
	count := hr.uvarint()
	if hr.end() != nil {
		return Capacity{}, nil, 0, formatFailure(0, ErrMalformed, "bad header record")
	}
	if issued < generation {
		return Capacity{}, nil, 0, formatFailure(0, ErrMalformed, "issued generation below the catalog's")
	}
	sr := &storeReader{frames: frames, next: 1}
	pin := emptyPin(generation)
	generations := map[uint64]bool{}
	for d := uint64(0); d < count; d++ {
		at := sr.next
		dep, ferr := sr.deployment()
		if ferr != nil {
			return Capacity{}, nil, 0, ferr
		}
		key := DeploymentKey{dep.tenant, dep.service}
		switch {
		case dep.generation == 0 || dep.generation > generation:
			return Capacity{}, nil, 0, formatFailure(at, ErrMalformed, "deployment generation outside the catalog's")
		case generations[dep.generation]:
			return Capacity{}, nil, 0, formatFailure(at, ErrMalformed, "deployment generation repeated")
		case pin.deployments[key] != nil:
			return Capacity{}, nil, 0, formatFailure(at, ErrMalformed, "deployment repeated")
		}
		generations[dep.generation] = true
		pin.deployments[key] = dep
		pin.usage.Revisions += dep.usage.Revisions
		pin.usage.PolicyBytes += dep.usage.PolicyBytes
	}
	if sr.next != len(frames) {
		return Capacity{}, nil, 0, formatFailure(sr.next, ErrMalformed, "unexpected record")
	}
	if pin.usage.Revisions > capacity.MaxRevisions || pin.usage.PolicyBytes > capacity.MaxPolicyBytes {
		return Capacity{}, nil, 0, formatFailure(-1, ErrMalformed, "deployments exceed the capacity")
	}
	return capacity, pin, issued, nil
}

type storeReader struct {
	frames []frame
	next   int
}

// take returns the next record if it is of the wanted kind.
func (s *storeReader) take(kind byte, what string) (*reader, int, *formatError) {
	if s.next >= len(s.frames) || s.frames[s.next].kind != kind {
		return nil, s.next, formatFailure(s.next, ErrMalformed, "expected a "+what+" record")
	}
	s.next++
	return &reader{b: s.frames[s.next-1].payload}, s.next - 1, nil
}

// deployment reads one deployment record and its route and revision
// records. Counts are not trusted for allocation: each item consumes a
// record, so the loops end with the records.
func (s *storeReader) deployment() (*deployment, *formatError) {
	r, at, ferr := s.take(recordDeploy, "deployment")
	if ferr != nil {
		return nil, ferr
	}
	spec := Deployment{Tenant: r.string(), Service: r.string()}
	generation := r.uvarint()
	routes := r.uvarint()
	if r.end() != nil {
		return nil, formatFailure(at, ErrMalformed, "bad deployment record")
	}
	var revisionRecords []int
	for i := uint64(0); i < routes; i++ {
		rr, rat, ferr := s.take(recordRoute, "route")
		if ferr != nil {
			return nil, ferr
		}
		rt := Route{Name: rr.string(), Contract: rr.string(), Function: rr.string()}
		revisions := rr.uvarint()
		if rr.end() != nil {
			return nil, formatFailure(rat, ErrMalformed, "bad route record")
		}
		for j := uint64(0); j < revisions; j++ {
			vr, vat, ferr := s.take(recordRevision, "revision")
			if ferr != nil {
				return nil, ferr
			}
			rev, err := readRevisionRecord(vr.b)
			if err != nil {
				return nil, formatFailure(vat, ErrMalformed, "bad revision record")
			}
			rt.Revisions = append(rt.Revisions, rev)
			revisionRecords = append(revisionRecords, vat)
		}
		spec.Routes = append(spec.Routes, rt)
	}
	dep, err := compileDeployment(&spec, generation)
	if err != nil {
		return nil, formatFailure(at, ErrMalformed, "invalid deployment")
	}
	// The writer only writes normalized records; anything else was not
	// written by it, and would not survive a rewrite byte for byte.
	k := 0
	for i := range dep.routes {
		for j := range dep.routes[i].revisions {
			want := appendRevisionRecord(nil, &dep.routes[i].revisions[j].spec)
			if !bytes.Equal(want, s.frames[revisionRecords[k]].payload) {
				return nil, formatFailure(revisionRecords[k], ErrMalformed, "non-canonical revision record")
			}
			k++
		}
	}
	return dep, nil
}
