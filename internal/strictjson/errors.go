package strictjson

import (
	"errors"
	"strconv"
)

// ErrTooLarge is returned by ReadAll, and its text reported by Parse, for
// an input longer than MaxDocumentBytes.
var ErrTooLarge = errors.New("input exceeds " + strconv.Itoa(MaxDocumentBytes) + " bytes")
