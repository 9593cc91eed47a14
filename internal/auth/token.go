package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
)

// A bearer token reads "strata_<id>_<secret>": id names the catalog's
// record (16 hex digits, shown by `strata token list`), secret is 32
// random bytes in base64url. The catalog keeps SHA-256 of the secret
// only, so a stolen catalog holds no usable token; a token is shown once,
// when it is created.
const tokenPrefix = "strata_"

// ErrBadToken is a string that is not a Strata bearer token.
var ErrBadToken = errors.New("malformed token")

// NewToken returns a new token's id, the whole token to hand the user, and
// the hash to store.
func NewToken() (id, tok, hash string) {
	var idb [8]byte
	var sec [32]byte
	rand.Read(idb[:])
	rand.Read(sec[:])
	id = hex.EncodeToString(idb[:])
	s := base64.RawURLEncoding.EncodeToString(sec[:])
	return id, tokenPrefix + id + "_" + s, HashSecret(s)
}

// NewS3Key returns a new S3 access key: an ID in AWS's form (20
// characters, "SK" then base32) and a 40-character secret.
func NewS3Key() (id, secret string) {
	var idb [15]byte
	var sec [30]byte
	rand.Read(idb[:])
	rand.Read(sec[:])
	id = "SK" + base32.StdEncoding.EncodeToString(idb[:])[:18]
	return id, base64.StdEncoding.EncodeToString(sec[:])
}

// ParseToken splits a token into its id and secret.
func ParseToken(tok string) (id, secret string, err error) {
	rest, ok := strings.CutPrefix(tok, tokenPrefix)
	if !ok {
		return "", "", ErrBadToken
	}
	id, secret, ok = strings.Cut(rest, "_")
	if !ok || len(id) != 16 || len(secret) != 43 {
		return "", "", ErrBadToken
	}
	if _, err := hex.DecodeString(id); err != nil {
		return "", "", ErrBadToken
	}
	if _, err := base64.RawURLEncoding.DecodeString(secret); err != nil {
		return "", "", ErrBadToken
	}
	return id, secret, nil
}

// HashSecret is what the catalog stores for a token's secret.
func HashSecret(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// SecretMatches compares a presented secret with a stored hash in
// constant time.
func SecretMatches(secret, hash string) bool {
	return subtle.ConstantTimeCompare([]byte(HashSecret(secret)), []byte(hash)) == 1
}
