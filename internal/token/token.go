// Package token owns the capabilities the core signs and movers check.
//
// Movers hold no namespace: they accept a transfer only when it carries a
// token the core signed for exactly that operation, device and object, with
// an expiry and a byte limit. That is how third-party transfer stays safe
// when data bypasses the core. Tokens are HMAC-SHA256 over a JSON claim set,
// keyed by a secret the core and its movers share. Each token also carries
// the core's epoch (a counter bumped at every core start): a mover refuses
// tokens from an older epoch once it has seen a newer one, so the core may
// reclaim every transfer left pending by its previous life.
package token

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"sync"
	"time"

	json "github.com/goccy/go-json"
)

// Operations a token may grant.
const (
	OpWrite  = "write"
	OpRead   = "read"
	OpDelete = "delete"
)

// Errors returned by Verify.
var (
	ErrInvalid = errors.New("token: invalid signature")
	ErrExpired = errors.New("token: expired")
	ErrScope   = errors.New("token: does not grant this operation")
)

// Claims is what a token grants.
type Claims struct {
	Op      string `json:"op"`
	Device  string `json:"dev"`
	Object  string `json:"obj"`
	MaxLen  int64  `json:"max,omitempty"` // write: bytes the holder may store
	Epoch   int64  `json:"ep"`
	Expires int64  `json:"exp"` // unix seconds
	// User and UID are whom the core issued the token to: a mover logs
	// them with the transfer.
	User string `json:"usr,omitempty"`
	UID  uint32 `json:"uid,omitempty"`
}

// Signer signs and verifies tokens and receipts with one key.
type Signer struct {
	key []byte
	// macs holds keyed HMACs to Reset and reuse: a small file's put
	// takes four MACs (its token signed and checked, its receipt made
	// and checked), and a new HMAC hashes its key twice and allocates
	// two digests before it hashes a byte of the message.
	macs sync.Pool
}

// NewSigner derives the token key from the cluster secret. The derivation
// keeps the raw secret out of every MAC computed on the data path.
func NewSigner(secret []byte) *Signer {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("strata token key v1"))
	s := &Signer{key: m.Sum(nil)}
	s.macs.New = func() any { return hmac.New(sha256.New, s.key) }
	return s
}

func (s *Signer) mac(b []byte) []byte {
	m := s.macs.Get().(hash.Hash)
	m.Write(b)
	sum := m.Sum(nil)
	m.Reset()
	s.macs.Put(m)
	return sum
}

// Sign returns the encoded token for c.
func (s *Signer) Sign(c Claims) string {
	b, _ := json.Marshal(c) // Claims has only plain fields: cannot fail
	enc := base64.RawURLEncoding
	return enc.EncodeToString(b) + "." + enc.EncodeToString(s.mac(b))
}

// Verify checks tok's signature and expiry and returns its claims.
func (s *Signer) Verify(tok string, now time.Time) (Claims, error) {
	var c Claims
	body, sig, ok := strings.Cut(tok, ".")
	if !ok {
		return c, ErrInvalid
	}
	enc := base64.RawURLEncoding
	b, err1 := enc.DecodeString(body)
	mac, err2 := enc.DecodeString(sig)
	if err1 != nil || err2 != nil || !hmac.Equal(mac, s.mac(b)) {
		return c, ErrInvalid
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, ErrInvalid
	}
	if now.Unix() > c.Expires {
		return c, ErrExpired
	}
	return c, nil
}

// Check verifies tok and that it grants op on device/object.
func (s *Signer) Check(tok, op, device, object string, now time.Time) (Claims, error) {
	c, err := s.Verify(tok, now)
	if err != nil {
		return c, err
	}
	if c.Op != op || c.Device != device || c.Object != object {
		return c, fmt.Errorf("%w: %s %s/%s", ErrScope, op, device, object)
	}
	return c, nil
}

// Receipt is the mover's signed statement that device/object holds length
// bytes with the given CRC32C, durably. The core accepts a commit only with a
// valid receipt for every segment, so a client cannot commit data a mover
// never stored.
func (s *Signer) Receipt(device, object string, length int64, crc uint32) string {
	msg := "receipt\x00" + device + "\x00" + object + "\x00" + strconv.FormatInt(length, 10) + "\x00" + strconv.FormatUint(uint64(crc), 16)
	return hex.EncodeToString(s.mac([]byte(msg)))
}

// CheckReceipt reports whether r is a valid receipt for the given segment.
func (s *Signer) CheckReceipt(r, device, object string, length int64, crc uint32) bool {
	want := s.Receipt(device, object, length, crc)
	return hmac.Equal([]byte(r), []byte(want))
}
