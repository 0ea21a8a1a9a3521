package trace

// decodeRecorded is the decoder of lines as the recorder writes them.
// encoding/json's reflection costs several microseconds a line, most of a
// replay's time; a trace's lines as the recorder writes them (exact keys,
// plain ASCII strings, no escapes) are decoded here by hand instead. It
// accepts a subset of what encoding/json accepts and builds the same Line;
// anything else (an escape, a key in another case, an unknown key, a type
// it does not expect) makes it give up, and DecodeLine decodes the line
// again with encoding/json, whose answer (and error message) stands.
// FuzzRecordedDecoderMatchesEncodingJSON holds it to encoding/json.
//
// It decodes data into l (reset first) and reports whether it
// could; when it could not, l is to be decoded again.
func decodeRecorded(data []byte, l *Line, in *interner) bool {
	*l = Line{}
	d := recordedDecoder{data: data, ok: true, in: in}
	d.line(l)
	d.ws()
	return d.ok && d.i == len(d.data)
}

func (d *recordedDecoder) line(line *Line) {
	l := &decodingLine{Line: line}
	d.object(func(key []byte) {
		switch string(key) {
		case "k":
			l.Kind = d.istr()
		case "order":
			l.Order = d.uint64()
		case "t":
			l.T = d.int64()
		// Header
		case "version":
			l.header().Version = int(d.int64())
		case "start_unix_ns":
			l.header().StartUnixNano = d.int64()
		case "file":
			l.header().File = d.uint64()
		case "policy_sha256":
			l.header().PolicySHA256 = d.str()
		// Catalog
		case "catalog_generation":
			l.catalog().Generation = d.uint64()
		case "catalog_json":
			l.catalog().File = d.bytes()
		case "catalog_part":
			l.catalog().Part = d.uint32()
		case "catalog_parts":
			l.catalog().Parts = d.uint32()
		// Change
		case "generation":
			l.change().Generation = d.uint64()
		case "deployment_json":
			l.change().Deployment = d.bytes()
		case "deployment_part":
			l.change().DeploymentPart = d.uint32()
		case "deployment_parts":
			l.change().DeploymentParts = d.uint32()
		case "tenant":
			l.change().Tenant = d.istr()
		case "service":
			l.change().Service = d.istr()
		// Load
		case "sequence":
			l.load().Sequence = d.uint64()
		case "observed_t":
			l.load().ObservedT = d.int64()
		case "cpu_pressure":
			l.load().CPUPressure = d.float64()
		case "memory_pressure":
			l.load().MemoryPressure = d.float64()
		case "queue_delay_ns":
			l.load().QueueDelayNS = d.int64s()
		// Decision
		case "stage":
			l.decision().Stage = d.istr()
		case "same":
			l.decision().Same = d.uint8()
		case "principal":
			dec := l.decision()
			if d.null() {
				dec.Principal = nil
				return
			}
			if dec.Principal == nil {
				// As encoding/json does for a nil pointer: a new zero
				// value, never the fields of an earlier object that a
				// null since replaced.
				l.block.principal = Principal{}
				dec.Principal = &l.block.principal
			}
			d.principal(dec.Principal)
		case "target":
			d.target(&l.decision().Target)
		case "routing_key":
			l.decision().RoutingKey = d.str()
		case "revision":
			dec := l.decision()
			if d.null() {
				dec.Revision = nil
				return
			}
			if dec.Revision == nil {
				l.block.revision = Revision{}
				dec.Revision = &l.block.revision
			}
			d.revision(dec.Revision)
		case "pin_generation":
			l.decision().Generation = d.uint64()
		case "activation_id":
			l.decision().ActivationID = d.str()
		case "priority":
			l.decision().Priority = d.uint32()
		case "budget":
			d.budget(&l.decision().Budget)
		case "payload_bytes":
			l.decision().PayloadBytes = d.uint64()
		case "deadline_unix_ms":
			l.decision().DeadlineUnixMS = d.optInt64()
		case "clock":
			l.decision().Clock = d.bool()
		case "committed":
			l.decision().Committed = d.bool()
		case "since_ns":
			l.decision().Since = d.int64s()
		case "load":
			l.decision().LoadSequence = d.uint64()
		case "commit_load":
			l.decision().CommitLoadSequence = d.uint64()
		case "answer":
			l.decision().Answer = d.istr()
		case "scope":
			l.decision().Scope = d.istr()
		case "dimension":
			l.decision().Dimension = d.istr()
		// Move
		case "of":
			l.move().Of = d.uint64()
		case "elapsed_ns":
			l.move().ElapsedNS = d.int64()
		case "refused":
			l.move().Refused = d.bool()
		case "reclaimed":
			l.move().Reclaimed = d.bool()
		// Dropped
		case "dropped_lines":
			l.dropped().Lines = d.uint64()
		default:
			d.fail()
		}
	})
}

func (d *recordedDecoder) principal(p *Principal) {
	d.object(func(key []byte) {
		switch string(key) {
		case "kind":
			p.Kind = d.istr()
		case "subject":
			p.Subject = d.istr()
		case "tenant":
			p.Tenant = d.istr()
		case "service":
			p.Service = d.istr()
		case "admin":
			p.Admin = d.bool()
		default:
			d.fail()
		}
	})
}

func (d *recordedDecoder) target(t *Target) {
	d.object(func(key []byte) {
		switch string(key) {
		case "tenant":
			t.Tenant = d.istr()
		case "service":
			t.Service = d.istr()
		case "route":
			t.Route = d.istr()
		default:
			d.fail()
		}
	})
}

func (d *recordedDecoder) revision(r *Revision) {
	d.object(func(key []byte) {
		switch string(key) {
		case "tenant":
			r.Tenant = d.istr()
		case "service":
			r.Service = d.istr()
		case "route":
			r.Route = d.istr()
		case "contract":
			r.Contract = d.istr()
		case "function":
			r.Function = d.istr()
		case "revision":
			r.Revision = d.istr()
		case "release":
			r.Release = d.istr()
		default:
			d.fail()
		}
	})
}

func (d *recordedDecoder) budget(b *Budget) {
	d.object(func(key []byte) {
		switch string(key) {
		case "cpu_fuel":
			b.CPUFuel = d.uint64()
		case "memory_bytes":
			b.MemoryBytes = d.uint64()
		case "wall_time_ns":
			b.WallTimeNS = d.optInt64()
		default:
			d.fail()
		}
	})
}

func (l *Line) header() *Header {
	if l.Header == nil {
		l.Header = new(Header)
	}
	return l.Header
}

func (l *Line) catalog() *Catalog {
	if l.Catalog == nil {
		l.Catalog = new(Catalog)
	}
	return l.Catalog
}

func (l *Line) change() *Change {
	if l.Change == nil {
		l.Change = new(Change)
	}
	return l.Change
}

func (l *Line) load() *Load {
	if l.Load == nil {
		l.Load = new(Load)
	}
	return l.Load
}

// decisionBlock is a decision line's parts in one allocation.
type decisionBlock struct {
	decision  Decision
	principal Principal
	revision  Revision
}

// decodingLine is a Line being decoded: the line, and the block its
// decision's parts are taken from, allocated when the line is one.
type decodingLine struct {
	*Line
	block *decisionBlock
}

func (l *decodingLine) decision() *Decision {
	if l.Decision == nil {
		l.block = new(decisionBlock)
		l.Decision = &l.block.decision
	}
	return l.Decision
}

func (l *Line) move() *Move {
	if l.Move == nil {
		l.Move = new(Move)
	}
	return l.Move
}

func (l *Line) dropped() *Dropped {
	if l.Dropped == nil {
		l.Dropped = new(Dropped)
	}
	return l.Dropped
}
