package main

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestANodeErrorIsPrefixedOncePerLine(t *testing.T) {
	err := errors.Join(errors.New("latentd: record: trace: /var/t.jsonl: write: no space left on device"),
		errors.New("latentd: catalog: closed"), errors.New("store: busy"))
	assert.Equal(t, "latentd: record: trace: /var/t.jsonl: write: no space left on device\n"+
		"latentd: catalog: closed\nlatentd: store: busy", nodeErrorLines(err))
}
