package dist

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// A DIST key has a role. An element key (HMAC-SHA256, held by every
// element and the VCP) seals hellos and probes. The VCP's key (Ed25519,
// its private half on the VCP hosts alone) signs everything that
// configures an element: an element checks those with the public half,
// so one compromised element cannot configure another (docs/dist.md,
// "Keys and roles").
type KeyRole uint8

const (
	RoleElementKey KeyRole = 1
	RoleVCPKey     KeyRole = 2
)

func (r KeyRole) String() string {
	if r == RoleVCPKey {
		return "vcp"
	}
	return "element"
}

// Key is a key a sender seals with, and the id that names it on the wire,
// so keys can be rolled over: a receiver accepts the old and the new one.
// An element key has Secret; the VCP's key has Private.
type Key struct {
	ID      uint8
	Secret  []byte
	Private ed25519.PrivateKey
}

// Role is what the key may seal.
func (k Key) Role() KeyRole { return k.Verifier().Role() }

// Verifier is what a receiver holds of a key: an element key's secret,
// or the VCP's public key.
type Verifier struct {
	Secret []byte
	Public ed25519.PublicKey
}

// Role is what frames checked with v may carry.
func (v Verifier) Role() KeyRole {
	if v.Public != nil {
		return RoleVCPKey
	}
	return RoleElementKey
}

// trailerLen is the length of the trailer a frame sealed with v carries.
func (v Verifier) trailerLen() int {
	if v.Public != nil {
		return SigLen
	}
	return MACLen
}

// Verifier returns what a receiver needs to check k's frames.
func (k Key) Verifier() Verifier {
	if k.Private != nil {
		return Verifier{Public: k.Private.Public().(ed25519.PublicKey)}
	}
	return Verifier{Secret: k.Secret}
}

// Keyring is the set of keys a receiver accepts, by id.
type Keyring map[uint8]Verifier

// Ring returns the keyring that accepts keys. Two keys with one id are a
// configuration error that Ring leaves to the caller's files to prevent:
// the later wins.
func Ring(keys ...Key) Keyring {
	r := make(Keyring, len(keys))
	for _, k := range keys {
		r[k.ID] = k.Verifier()
	}
	return r
}

// MinKeyLen is the shortest secret accepted: RFC 2104 §3 advises keys no
// shorter than the hash output.
const MinKeyLen = 32

// Validate refuses a key too short to be a secret, or a malformed one.
func (k Key) Validate() error {
	if k.Private != nil {
		if len(k.Private) != ed25519.PrivateKeySize {
			return fmt.Errorf("VCP key %d is %d bytes; an Ed25519 private key is %d", k.ID, len(k.Private), ed25519.PrivateKeySize)
		}
		return nil
	}
	if len(k.Secret) < MinKeyLen {
		return fmt.Errorf("DIST key %d is %d bytes; use at least %d random bytes", k.ID, len(k.Secret), MinKeyLen)
	}
	return nil
}

// A key file holds one key a line, "ID:HEX" or "HEX" (the id the config
// names), '#' comments allowed. The first key is the one the holder seals
// with; every key is accepted. That is what a rollover needs: add the new
// key second everywhere, then move it first everywhere, then drop the old
// one (docs/operations.md, "Rolling over DIST keys").
//
// The element key file's keys are 32 or more random bytes; the VCP's
// private file (vcp.key) holds 64-byte Ed25519 private keys, its public
// file (vcp.pub) 32-byte public keys.

// ReadKeyFile reads an element key file and returns its first key.
func ReadKeyFile(path string, id uint8) (Key, error) {
	keys, err := ReadKeys(path, id)
	if err != nil {
		return Key{}, err
	}
	return keys[0], nil
}

// ReadKeys reads every key of an element key file, the sealing one first.
func ReadKeys(path string, id uint8) ([]Key, error) {
	lines, err := readKeyLines(path, id)
	if err != nil {
		return nil, err
	}
	var keys []Key
	for _, l := range lines {
		k := Key{ID: l.id, Secret: l.b}
		if err := k.Validate(); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, l.line, err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// ReadVCPKeys reads the VCP's private key file (vcp.key), the signing key
// first.
func ReadVCPKeys(path string, id uint8) ([]Key, error) {
	lines, err := readKeyLines(path, id)
	if err != nil {
		return nil, err
	}
	var keys []Key
	for _, l := range lines {
		if len(l.b) != ed25519.PrivateKeySize {
			return nil, fmt.Errorf("%s:%d: not an Ed25519 private key (%d bytes, want %d)", path, l.line, len(l.b), ed25519.PrivateKeySize)
		}
		k := Key{ID: l.id, Private: ed25519.PrivateKey(l.b)}
		// A private key is its seed and its public half: a file whose
		// halves disagree is corrupt.
		if !bytes.Equal(ed25519.NewKeyFromSeed(k.Private.Seed()), k.Private) {
			return nil, fmt.Errorf("%s:%d: Ed25519 private key does not match its public half", path, l.line)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// ReadVCPPublic reads the VCP's public key file (vcp.pub), which is what
// an LB or a back-end holds. It refuses a private key: an element that
// could sign as the VCP could configure every other.
func ReadVCPPublic(path string, id uint8) (Keyring, error) {
	lines, err := readKeyLines(path, id)
	if err != nil {
		return nil, err
	}
	r := make(Keyring)
	for _, l := range lines {
		switch len(l.b) {
		case ed25519.PublicKeySize:
			r[l.id] = Verifier{Public: ed25519.PublicKey(l.b)}
		case ed25519.PrivateKeySize:
			return nil, fmt.Errorf("%s:%d: this is the VCP's private key; an element holds the public one (vcp.pub)", path, l.line)
		default:
			return nil, fmt.Errorf("%s:%d: not an Ed25519 public key (%d bytes, want %d)", path, l.line, len(l.b), ed25519.PublicKeySize)
		}
	}
	return r, nil
}

type keyLine struct {
	line int
	id   uint8
	b    []byte
}

func readKeyLines(path string, id uint8) ([]keyLine, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read DIST key: %w", err)
	}
	var out []keyLine
	seen := map[uint8]bool{}
	for i, s := range strings.Split(string(raw), "\n") {
		s, _, _ = strings.Cut(s, "#")
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		l := keyLine{line: i + 1, id: id}
		if idText, h, ok := strings.Cut(s, ":"); ok {
			n, err := strconv.ParseUint(idText, 10, 8)
			if err != nil || n == 0 {
				return nil, fmt.Errorf("%s:%d: key id %q: use 1 to 255", path, l.line, idText)
			}
			l.id, s = uint8(n), h
		}
		if l.b, err = hex.DecodeString(s); err != nil {
			return nil, fmt.Errorf("%s:%d: DIST key is not hex: %w", path, l.line, err)
		}
		if seen[l.id] {
			return nil, fmt.Errorf("%s:%d: key id %d twice", path, l.line, l.id)
		}
		seen[l.id] = true
		out = append(out, l)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no DIST key", path)
	}
	return out, nil
}

// Key file names in a deployment's key directory: made by MakeKeys, named
// by the elements' configs (key_file, vcp_key_file).
const (
	DefaultVCPKeyID = 2

	ElementKeyFile   = "key"
	VCPKeyFile       = "vcp.key"
	VCPPublicKeyFile = "vcp.pub"
	// RIBKeyFile is the RIB feed's TCP-MD5 password (40 hex digits), apart
	// from the DIST keys so that rolling them over leaves the feed up.
	RIBKeyFile = "rib.key"
)

// MakeKeys writes a deployment's DIST keys into dir: an element key (id
// elementID), a VCP key pair (id vcpID) and the RIB feed's password,
// 0600 but for the public key. A file already there is kept, so that
// running it again changes nothing.
func MakeKeys(dir string, elementID, vcpID uint8) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	secret := make([]byte, MinKeyLen)
	if _, err := rand.Read(secret); err != nil {
		return err
	}
	if err := writeNew(filepath.Join(dir, ElementKeyFile), fmt.Sprintf("%d:%x\n", elementID, secret)); err != nil {
		return err
	}
	rib := make([]byte, 20)
	if _, err := rand.Read(rib); err != nil {
		return err
	}
	if err := writeNew(filepath.Join(dir, RIBKeyFile), fmt.Sprintf("%x\n", rib)); err != nil {
		return err
	}
	priv := filepath.Join(dir, VCPKeyFile)
	if _, err := os.Stat(priv); errors.Is(err, os.ErrNotExist) {
		pub, key, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return err
		}
		if err := writeNew(priv, fmt.Sprintf("%d:%x\n", vcpID, key)); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, VCPPublicKeyFile), fmt.Appendf(nil, "%d:%x\n", vcpID, pub), 0o644)
	}
	return nil
}

func writeNew(path, text string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Rollover steps of RotateKeys, in the order a rollover takes them.
const (
	RotateAdd     = "add"     // a new key last in each file: accepted, not yet sealing
	RotatePromote = "promote" // the newest key first: it seals
	RotateRetire  = "retire"  // every key but the first dropped
)

// RotateKeys takes one step of a rollover of the DIST keys in dir (the
// files MakeKeys writes). Between steps every element and VCP must have
// read its files again (SIGHUP or `msr ctl reload`), so that no frame is
// ever sealed with a key a receiver does not hold yet (docs/operations.md,
// "Rolling over DIST keys").
func RotateKeys(dir, step string) error {
	elemPath, privPath, pubPath := filepath.Join(dir, ElementKeyFile), filepath.Join(dir, VCPKeyFile), filepath.Join(dir, VCPPublicKeyFile)
	elems, err := ReadKeys(elemPath, 1)
	if err != nil {
		return err
	}
	privs, err := ReadVCPKeys(privPath, DefaultVCPKeyID)
	if err != nil {
		return err
	}
	switch step {
	case RotateAdd:
		if len(elems) > 1 || len(privs) > 1 {
			return fmt.Errorf("a rollover is under way (%s holds %d keys, %s %d): promote and retire it first", elemPath, len(elems), privPath, len(privs))
		}
		used := map[uint8]bool{}
		for _, k := range append(elems, privs...) {
			used[k.ID] = true
		}
		free := func() (uint8, error) {
			for id := 1; id <= 255; id++ {
				if !used[uint8(id)] {
					used[uint8(id)] = true
					return uint8(id), nil
				}
			}
			return 0, errors.New("no free key id")
		}
		secret := make([]byte, MinKeyLen)
		if _, err := rand.Read(secret); err != nil {
			return err
		}
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return err
		}
		eid, err := free()
		if err != nil {
			return err
		}
		vid, err := free()
		if err != nil {
			return err
		}
		elems = append(elems, Key{ID: eid, Secret: secret})
		privs = append(privs, Key{ID: vid, Private: priv})
	case RotatePromote:
		if len(elems) < 2 || len(privs) < 2 {
			return fmt.Errorf("no new key to promote in %s: add one first", dir)
		}
		elems = append([]Key{elems[len(elems)-1]}, elems[:len(elems)-1]...)
		privs = append([]Key{privs[len(privs)-1]}, privs[:len(privs)-1]...)
	case RotateRetire:
		elems, privs = elems[:1], privs[:1]
	default:
		return fmt.Errorf("rollover step %q: use %s, %s or %s", step, RotateAdd, RotatePromote, RotateRetire)
	}
	var e, v, p strings.Builder
	for _, k := range elems {
		fmt.Fprintf(&e, "%d:%x\n", k.ID, k.Secret)
	}
	for _, k := range privs {
		fmt.Fprintf(&v, "%d:%x\n", k.ID, []byte(k.Private))
		fmt.Fprintf(&p, "%d:%x\n", k.ID, []byte(k.Verifier().Public))
	}
	for _, f := range []struct {
		path, text string
		mode       os.FileMode
	}{{elemPath, e.String(), 0o600}, {privPath, v.String(), 0o600}, {pubPath, p.String(), 0o644}} {
		if err := replaceFile(f.path, f.text, f.mode); err != nil {
			return err
		}
	}
	return nil
}

// replaceFile writes text to path through a temporary file and a rename:
// a reader sees the old file or the new one, never half of it.
func replaceFile(path, text string, mode os.FileMode) error {
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(text), mode); err != nil {
		return err
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
