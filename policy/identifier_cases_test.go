package policy_test

import "strings"

// identifierLocation is one place in the file that holds an identifier.
type identifierLocation struct {
	name string
	path string // the path the problem is reported at
	set  func(d *document, s string)
	// setRaw stores raw bytes (not JSON-escaped) at the location.
	setRaw func(d *document, raw string)
}

func at(name, path string) identifierLocation {
	return identifierLocation{
		name:   name,
		path:   path,
		set:    func(d *document, s string) { d.set(path, s) },
		setRaw: func(d *document, raw string) { d.setRaw(path, raw) },
	}
}

// identifierLocations lists every kind of identifier a policy file holds.
func identifierLocations() []identifierLocation {
	// A new trust class, so that no tenant's reference breaks with it.
	newTrustClass := func(d *document) {
		tc := d.copyOf("trust_classes[0]")
		d.push("trust_classes", tc)
	}
	return []identifierLocation{
		at("tenant id", "tenants[0].id"),
		at("principal subject", "tenants[0].principals[0].subject"),
		at("queue class name", "queue_classes[0].name"),
		{
			name:   "trust class name",
			path:   "trust_classes[2].name",
			set:    func(d *document, s string) { newTrustClass(d); d.set("trust_classes[2].name", s) },
			setRaw: func(d *document, raw string) { newTrustClass(d); d.setRaw("trust_classes[2].name", raw) },
		},
		at("backend", "node.backends[0]"),
		at("state model", "node.state_models[0]"),
		at("placement architecture", "node.placement.architecture"),
		at("placement region", "node.placement.region"),
		at("placement zone", "node.placement.zone"),
		at("cell class feature", "cell_classes[1].features[0]"),
	}
}

// badIdentifiers break the identifier rules of the base file (at most 64
// bytes).
var badIdentifiers = []struct {
	name  string
	value string
}{
	{"empty", ""},
	{"with a space", "a b"},
	{"with a tab", "a\tb"},
	{"with a newline", "a\nb"},
	{"with a no-break space", "a\u00a0b"},
	{"with an em space", "a\u2003b"},
	{"with a control character", "a\x01b"},
	{"with DEL", "a\x7fb"},
	{"with a next-line control", "a\u0085b"},
	{"with a right-to-left override", "a\u202eb"},
	{"with a zero-width space", "a\u200bb"},
	{"with a byte-order mark", "\ufeffab"},
	{"one byte too long", strings.Repeat("x", 65)},
	{"one multi-byte rune too long", strings.Repeat("é", 32) + "x"},
}

// goodIdentifiers are accepted wherever an identifier goes.
var goodIdentifiers = []struct {
	name  string
	value string
}{
	{"exactly the maximum length", strings.Repeat("x", 64)},
	{"non-ASCII", "café"},
	{"multi-byte runes up to the maximum length", strings.Repeat("é", 32)},
	{"punctuation", "a-b_c.d:e/f@g"},
}

func identifierCases() []ruleCase {
	var cases []ruleCase
	for _, loc := range identifierLocations() {
		for _, bad := range badIdentifiers {
			cases = append(cases, ruleCase{
				name: loc.name + " " + bad.name,
				edit: func(d *document) { loc.set(d, bad.value) },
				want: []want{{loc.path, notIdentifier}},
			})
		}
		for _, good := range goodIdentifiers {
			cases = append(cases, ruleCase{
				name: loc.name + " " + good.name + " is accepted",
				edit: func(d *document) { loc.set(d, good.value) },
			})
		}
		// encoding/json would turn the bad byte into U+FFFD; a JSON file
		// must be UTF-8, so the whole file is refused.
		cases = append(cases, ruleCase{
			name: loc.name + " with invalid UTF-8",
			edit: func(d *document) { loc.setRaw(d, "a\xffb") },
			want: []want{{"", "UTF-8"}},
		})
	}
	return cases
}
