package wire

import (
	"strconv"
	"unicode/utf8"
)

// A Request is encoded by hand, not by the JSON library. The encoder
// github.com/goccy/go-json runs in one function whose stack frame is
// larger than a new goroutine's stack, and requests are mostly sent from
// new goroutines (one per file a tape server reads ahead, one per stripe
// of a put): each send grew the goroutine's stack, a copy of the stack
// and a walk of that function's tables that cost more than the encoding
// (16 µs a file, 7 % of the CPU of a job moving 64 KiB files to tape).
// The receiving side decodes with the library as before: the field
// names and the omitted zero values are those of the struct tags.

// appendJSON appends r as a JSON object.
func (r *Request) appendJSON(b []byte) []byte {
	b = append(b, `{"op":`...)
	b = appendString(b, r.Op)
	b = append(b, `,"token":`...)
	b = appendString(b, r.Token)
	b = append(b, `,"device":`...)
	b = appendString(b, r.Device)
	b = append(b, `,"object":`...)
	b = appendString(b, r.Object)
	if r.Offset != 0 {
		b = append(b, `,"offset":`...)
		b = strconv.AppendInt(b, r.Offset, 10)
	}
	if r.Length != 0 {
		b = append(b, `,"length":`...)
		b = strconv.AppendInt(b, r.Length, 10)
	}
	if r.Verify {
		b = append(b, `,"verify":true`...)
	}
	if r.Handle {
		b = append(b, `,"handle":true`...)
	}
	if s := r.Source; s != nil {
		b = append(b, `,"source":{"size":`...)
		b = strconv.AppendInt(b, s.Size, 10)
		b = append(b, `,"unit":`...)
		b = strconv.AppendInt(b, s.Unit, 10)
		b = append(b, `,"width":`...)
		b = strconv.AppendInt(b, int64(s.Width), 10)
		b = append(b, `,"stripe":`...)
		b = strconv.AppendInt(b, int64(s.Stripe), 10)
		b = append(b, '}')
	}
	if r.Ring {
		b = append(b, `,"ring":true`...)
	}
	return append(b, '}')
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string the way encoding/json writes
// it (HTML characters aside): control characters, quote and backslash
// escaped, invalid UTF-8 replaced by U+FFFD, U+2028 and U+2029 escaped.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, `\n`...)
			case '\r':
				b = append(b, `\r`...)
			case '\t':
				b = append(b, `\t`...)
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += n
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += n
			start = i
			continue
		}
		i += n
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
