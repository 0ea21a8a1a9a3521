package trace

import "strconv"

// AppendLine appends l to dst as one line of a trace: exactly the bytes
// a json.Encoder with SetEscapeHTML(false) writes for it (its JSON and a
// newline), without reflection. The writer encodes every line with it,
// but for the parts of a decision it leaves out (Decision.Same);
// FuzzAppendLineMatchesEncodingJSON holds it to encoding/json.
//
// A line that encoding/json refuses (a NaN or infinite pressure) is an
// error, and dst is returned as it was.
func AppendLine(dst []byte, l *Line) ([]byte, error) {
	return appendLine(dst, l, nil)
}

// appendLine is AppendLine, or with e (the writer's fragments) the same
// line less a decision's parts equal to the ones e keeps, which it names
// in "same" (fragments.go).
func appendLine(dst []byte, l *Line, e *fragments) ([]byte, error) {
	start := len(dst)
	dst = append(dst, `{"k":`...)
	dst = appendString(dst, l.Kind)
	if l.Order != 0 {
		dst = append(dst, `,"order":`...)
		dst = strconv.AppendUint(dst, l.Order, 10)
	}
	if l.T != 0 {
		dst = append(dst, `,"t":`...)
		dst = strconv.AppendInt(dst, l.T, 10)
	}
	if h := l.Header; h != nil {
		dst = append(dst, `,"version":`...)
		dst = strconv.AppendInt(dst, int64(h.Version), 10)
		dst = append(dst, `,"start_unix_ns":`...)
		dst = strconv.AppendInt(dst, h.StartUnixNano, 10)
		dst = append(dst, `,"file":`...)
		dst = strconv.AppendUint(dst, h.File, 10)
		dst = append(dst, `,"policy_sha256":`...)
		dst = appendString(dst, h.PolicySHA256)
	}
	if c := l.Catalog; c != nil {
		dst = append(dst, `,"catalog_generation":`...)
		dst = strconv.AppendUint(dst, c.Generation, 10)
		dst = append(dst, `,"catalog_json":`...)
		dst = appendBytes(dst, c.File)
		dst = appendUint32(dst, `,"catalog_part":`, c.Part)
		dst = appendUint32(dst, `,"catalog_parts":`, c.Parts)
	}
	if c := l.Change; c != nil {
		dst = append(dst, `,"generation":`...)
		dst = strconv.AppendUint(dst, c.Generation, 10)
		if len(c.Deployment) != 0 {
			dst = append(dst, `,"deployment_json":`...)
			dst = appendBytes(dst, c.Deployment)
		}
		dst = appendOptString(dst, `,"tenant":`, c.Tenant)
		dst = appendOptString(dst, `,"service":`, c.Service)
		dst = appendUint32(dst, `,"deployment_part":`, c.DeploymentPart)
		dst = appendUint32(dst, `,"deployment_parts":`, c.DeploymentParts)
	}
	if ld := l.Load; ld != nil {
		dst = append(dst, `,"sequence":`...)
		dst = strconv.AppendUint(dst, ld.Sequence, 10)
		dst = append(dst, `,"observed_t":`...)
		dst = strconv.AppendInt(dst, ld.ObservedT, 10)
		var err error
		dst = append(dst, `,"cpu_pressure":`...)
		if dst, err = appendFloat(dst, ld.CPUPressure); err != nil {
			return dst[:start], err
		}
		dst = append(dst, `,"memory_pressure":`...)
		if dst, err = appendFloat(dst, ld.MemoryPressure); err != nil {
			return dst[:start], err
		}
		dst = append(dst, `,"queue_delay_ns":`...)
		if ld.QueueDelayNS == nil {
			dst = append(dst, "null"...)
		} else {
			dst = appendInts(dst, ld.QueueDelayNS)
		}
	}
	if d := l.Decision; d != nil {
		dst = appendDecision(dst, d, e)
	}
	if m := l.Move; m != nil {
		dst = append(dst, `,"of":`...)
		dst = strconv.AppendUint(dst, m.Of, 10)
		dst = append(dst, `,"elapsed_ns":`...)
		dst = strconv.AppendInt(dst, m.ElapsedNS, 10)
		dst = appendTrue(dst, `,"refused":true`, m.Refused)
		dst = appendTrue(dst, `,"reclaimed":true`, m.Reclaimed)
	}
	if dr := l.Dropped; dr != nil {
		dst = append(dst, `,"dropped_lines":`...)
		dst = strconv.AppendUint(dst, dr.Lines, 10)
	}
	if f := l.Fleet; f != nil {
		dst = append(dst, `,"fleet_tenant":`...)
		dst = appendString(dst, f.Tenant)
		dst = appendTrue(dst, `,"fleet_published":true`, f.Published)
		dst = appendInt(dst, `,"fleet_slice":`, f.Slice)
		dst = appendInt(dst, `,"fleet_valid_until_t":`, f.ValidUntilT)
		dst = append(dst, `,"fleet_writes":`...)
		dst = strconv.AppendUint(dst, f.Writes, 10)
	}
	return append(dst, '}', '\n'), nil
}

// appendDecision appends d's fields, each after a comma. With e (the
// writer's), the parts equal to e's kept ones are left out and named in
// "same" instead of d.Same, and the parts written in full are kept.
func appendDecision(dst []byte, d *Decision, e *fragments) []byte {
	same := d.Same
	if e != nil {
		same = e.same(d)
	}
	dst = append(dst, `,"stage":`...)
	dst = appendString(dst, d.Stage)
	if same != 0 {
		dst = append(dst, `,"same":`...)
		dst = strconv.AppendUint(dst, uint64(same), 10)
	}
	if p := d.Principal; p != nil && (e == nil || same&SamePrincipal == 0) {
		start := len(dst)
		dst = appendPrincipal(dst, p)
		if e != nil {
			e.keepPrincipal(p, len(dst)-start)
		}
	}
	if e == nil || same&SameTarget == 0 {
		start := len(dst)
		dst = appendTarget(dst, &d.Target)
		if e != nil {
			e.keepTarget(&d.Target, len(dst)-start)
		}
	}
	dst = appendOptString(dst, `,"routing_key":`, d.RoutingKey)
	if r := d.Revision; r != nil {
		dst = appendRevision(dst, r)
	}
	if d.Generation != 0 {
		dst = append(dst, `,"pin_generation":`...)
		dst = strconv.AppendUint(dst, d.Generation, 10)
	}
	dst = appendOptString(dst, `,"activation_id":`, d.ActivationID)
	dst = append(dst, `,"priority":`...)
	dst = strconv.AppendUint(dst, uint64(d.Priority), 10)
	if e == nil || same&SameBudget == 0 {
		dst = appendBudget(dst, &d.Budget)
		if e != nil {
			e.keepBudget(&d.Budget)
		}
	}
	dst = append(dst, `,"payload_bytes":`...)
	dst = strconv.AppendUint(dst, d.PayloadBytes, 10)
	if d.DeadlineUnixMS != nil {
		dst = append(dst, `,"deadline_unix_ms":`...)
		dst = strconv.AppendInt(dst, *d.DeadlineUnixMS, 10)
	}
	dst = appendTrue(dst, `,"clock":true`, d.Clock)
	dst = appendTrue(dst, `,"committed":true`, d.Committed)
	if f := d.Fleet; f != nil {
		dst = append(dst, `,"fleet":{`...)
		if f.Published {
			dst = append(dst, `"published":true,`...)
		}
		if f.Slice != 0 {
			dst = append(dst, `"slice":`...)
			dst = strconv.AppendInt(dst, f.Slice, 10)
			dst = append(dst, ',')
		}
		dst = append(dst, `"remaining_ns":`...)
		dst = strconv.AppendInt(dst, f.RemainingNS, 10)
		dst = append(dst, `,"writes":`...)
		dst = strconv.AppendUint(dst, f.Writes, 10)
		dst = append(dst, '}')
	}
	if len(d.Since) != 0 {
		dst = append(dst, `,"since_ns":`...)
		dst = appendInts(dst, d.Since)
	}
	if d.LoadSequence != 0 {
		dst = append(dst, `,"load":`...)
		dst = strconv.AppendUint(dst, d.LoadSequence, 10)
	}
	if d.CommitLoadSequence != 0 {
		dst = append(dst, `,"commit_load":`...)
		dst = strconv.AppendUint(dst, d.CommitLoadSequence, 10)
	}
	dst = append(dst, `,"answer":`...)
	dst = appendString(dst, d.Answer)
	dst = appendOptString(dst, `,"scope":`, d.Scope)
	dst = appendOptString(dst, `,"dimension":`, d.Dimension)
	return dst
}

// appendPrincipal appends a decision's principal field.
func appendPrincipal(dst []byte, p *Principal) []byte {
	dst = append(dst, `,"principal":{"kind":`...)
	dst = appendString(dst, p.Kind)
	dst = append(dst, `,"subject":`...)
	dst = appendString(dst, p.Subject)
	dst = append(dst, `,"tenant":`...)
	dst = appendString(dst, p.Tenant)
	dst = appendOptString(dst, `,"service":`, p.Service)
	dst = appendTrue(dst, `,"admin":true`, p.Admin)
	return append(dst, '}')
}

// appendTarget appends a decision's target field.
func appendTarget(dst []byte, t *Target) []byte {
	dst = append(dst, `,"target":{"tenant":`...)
	dst = appendString(dst, t.Tenant)
	dst = append(dst, `,"service":`...)
	dst = appendString(dst, t.Service)
	dst = append(dst, `,"route":`...)
	dst = appendString(dst, t.Route)
	return append(dst, '}')
}

// appendRevision appends a decision's revision field.
func appendRevision(dst []byte, r *Revision) []byte {
	dst = append(dst, `,"revision":{"tenant":`...)
	dst = appendString(dst, r.Tenant)
	dst = append(dst, `,"service":`...)
	dst = appendString(dst, r.Service)
	dst = append(dst, `,"route":`...)
	dst = appendString(dst, r.Route)
	dst = append(dst, `,"contract":`...)
	dst = appendString(dst, r.Contract)
	dst = append(dst, `,"function":`...)
	dst = appendString(dst, r.Function)
	dst = append(dst, `,"revision":`...)
	dst = appendString(dst, r.Revision)
	dst = append(dst, `,"release":`...)
	dst = appendString(dst, r.Release)
	return append(dst, '}')
}

// appendBudget appends a decision's budget field.
func appendBudget(dst []byte, b *Budget) []byte {
	dst = append(dst, `,"budget":{"cpu_fuel":`...)
	dst = strconv.AppendUint(dst, b.CPUFuel, 10)
	dst = append(dst, `,"memory_bytes":`...)
	dst = strconv.AppendUint(dst, b.MemoryBytes, 10)
	if b.WallTimeNS != nil {
		dst = append(dst, `,"wall_time_ns":`...)
		dst = strconv.AppendInt(dst, *b.WallTimeNS, 10)
	}
	return append(dst, '}')
}
