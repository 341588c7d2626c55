// Package dist implements DIST, msr's internal control protocol: layer-2
// frames with EtherType 0x88B5 exchanged on the interconnect between load
// balancers, back-end routers and the virtual control plane.
//
// Every frame carries a 32-byte header (version, type, key id, sender id,
// sender epoch, sequence number), a typed body and an HMAC-SHA256 trailer
// computed over the Ethernet header, the DIST header and the body with a
// per-deployment key. A receiver authenticates a frame before it decodes
// the body, then checks (sender, epoch, seq) against a ReplayGuard. The byte
// layout is specified in docs/dist.md; testdata/vectors.json holds golden
// frames that another implementation can check itself against.
package dist

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"time"
)

// Wire constants. docs/dist.md is the normative description of each.
const (
	// EtherType is IEEE 802's "Local Experimental EtherType 1": never routed,
	// never used by a public protocol.
	EtherType = 0x88B5
	// Version is the only protocol version this package speaks.
	Version = 1

	EthHeaderLen = 14
	HeaderLen    = 32
	// MACLen is the trailer of a frame sealed with an element key
	// (HMAC-SHA256), SigLen of one signed with the VCP's (Ed25519).
	MACLen = sha256.Size
	SigLen = ed25519.SignatureSize
	// MaxFrameLen is an untagged Ethernet frame of a 1500-byte MTU,
	// without FCS: DIST never relies on jumbo frames. MaxBodyLen leaves
	// room for the longer trailer, whichever key seals the frame.
	MaxFrameLen = EthHeaderLen + 1500
	MaxBodyLen  = MaxFrameLen - EthHeaderLen - HeaderLen - SigLen
	MinFrameLen = EthHeaderLen + HeaderLen + MACLen
)

// GroupMAC is the destination of frames meant for every element of the
// interconnect (hellos, announcements). It is a locally administered
// multicast address, which a Linux bridge floods like any unknown group;
// the 01:80:c2:00:00:0x range would be eaten by the bridge itself.
var GroupMAC = net.HardwareAddr{0x03, 0x6d, 0x73, 0x72, 0x00, 0x01}

// Errors returned by Unmarshal and ReplayGuard.Check, one per reason a
// received frame is refused. Reason maps them to counter labels.
var (
	ErrTruncated  = errors.New("frame shorter than a DIST header and trailer")
	ErrOversized  = errors.New("frame longer than the 1514-byte maximum")
	ErrEtherType  = errors.New("not a DIST EtherType")
	ErrVersion    = errors.New("unsupported DIST version")
	ErrLength     = errors.New("body length does not match the frame length")
	ErrUnknownKey = errors.New("unknown key id")
	ErrAuth       = errors.New("HMAC does not match")
	ErrType       = errors.New("unknown message type")
	ErrMalformed  = errors.New("malformed message body")
	ErrReplay     = errors.New("replayed or stale sequence number")
	ErrRole       = errors.New("message needs the VCP's key")
)

// Reason returns the counter label of a receive error: "truncated",
// "auth", "replay", ... or "other" for an error this package did not make.
func Reason(err error) string {
	for _, r := range reasons {
		if errors.Is(err, r.err) {
			return r.label
		}
	}
	return "other"
}

var reasons = []struct {
	err   error
	label string
}{
	{ErrTruncated, "truncated"}, {ErrOversized, "oversized"},
	{ErrEtherType, "ethertype"}, {ErrVersion, "version"},
	{ErrLength, "length"}, {ErrUnknownKey, "unknown_key"},
	{ErrAuth, "auth"}, {ErrType, "type"},
	{ErrMalformed, "malformed"}, {ErrReplay, "replay"},
	{ErrRole, "role_refused"},
}

// Reasons lists every label Reason can return except "other", in a fixed
// order, so that counters can be printed with zeros.
func Reasons() []string {
	out := make([]string, len(reasons))
	for i, r := range reasons {
		out[i] = r.label
	}
	return out
}

// Header is the fixed part of every DIST frame after the Ethernet header.
type Header struct {
	Type   MsgType `json:"type"`
	KeyID  uint8   `json:"key_id"`
	Sender uint64  `json:"sender"`
	// Epoch identifies one run of the sender (it picks a larger one each
	// time it starts); Seq counts its frames within that run.
	Epoch uint64 `json:"epoch"`
	Seq   uint64 `json:"seq"`
}

// Frame is one decoded DIST frame.
type Frame struct {
	Dst    net.HardwareAddr `json:"dst"`
	Src    net.HardwareAddr `json:"src"`
	Header Header           `json:"header"`
	Msg    Message          `json:"-"`
	// Received is when the kernel took the frame in (Conn.Recv).
	Received time.Time `json:"-"`
}

// RIBPassword is the TCP-MD5 key (RFC 2385) of the iBGP sessions between
// the VCP's suite and the back-ends (the RIB feed), derived from the
// deployment key as the management API's token is: every element and the
// VCP agree on it with nothing more to distribute. 40 hex digits, which
// BIRD's and FRR's configs take as they are.
func (k Key) RIBPassword() string {
	m := hmac.New(sha256.New, k.Secret)
	m.Write([]byte("msr RIB feed TCP-MD5 v1"))
	return hex.EncodeToString(m.Sum(nil)[:20])
}

// Marshal encodes f with its message and seals it with key. The frame's
// Header.Type and Header.KeyID are taken from the message and the key.
func Marshal(f *Frame, key Key) ([]byte, error) {
	if len(f.Dst) != 6 || len(f.Src) != 6 {
		return nil, fmt.Errorf("marshal DIST frame: MAC addresses must be 6 bytes")
	}
	body, err := f.Msg.appendBody(nil)
	if err != nil {
		return nil, fmt.Errorf("marshal %s: %w", f.Msg.Type(), err)
	}
	if len(body) > MaxBodyLen {
		return nil, fmt.Errorf("marshal %s: body of %d bytes exceeds %d", f.Msg.Type(), len(body), MaxBodyLen)
	}
	b := make([]byte, EthHeaderLen+HeaderLen, MinFrameLen+len(body))
	copy(b[0:6], f.Dst)
	copy(b[6:12], f.Src)
	binary.BigEndian.PutUint16(b[12:14], EtherType)
	h := b[EthHeaderLen:]
	h[0] = Version
	h[1] = uint8(f.Msg.Type())
	h[2] = key.ID
	binary.BigEndian.PutUint16(h[4:6], uint16(len(body)))
	binary.BigEndian.PutUint64(h[8:16], f.Header.Sender)
	binary.BigEndian.PutUint64(h[16:24], f.Header.Epoch)
	binary.BigEndian.PutUint64(h[24:32], f.Header.Seq)
	b = append(b, body...)
	if key.Private != nil {
		return append(b, ed25519.Sign(key.Private, b)...), nil
	}
	return append(b, seal(key.Secret, b)...), nil
}

func seal(secret, b []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write(b)
	return m.Sum(nil)
}

// Unmarshal checks and decodes one received frame: size, EtherType,
// version, length, then the HMAC with the key its header names, and only
// then the body. It does not check for replay: that needs the receiver's
// state (ReplayGuard).
func Unmarshal(b []byte, keys Keyring) (*Frame, error) {
	switch {
	case len(b) < MinFrameLen:
		return nil, ErrTruncated
	case len(b) > MaxFrameLen:
		return nil, ErrOversized
	case binary.BigEndian.Uint16(b[12:14]) != EtherType:
		return nil, ErrEtherType
	}
	h := b[EthHeaderLen : EthHeaderLen+HeaderLen]
	if h[0] != Version {
		return nil, fmt.Errorf("%w %d", ErrVersion, h[0])
	}
	v, ok := keys[h[2]]
	if !ok {
		return nil, fmt.Errorf("%w %d", ErrUnknownKey, h[2])
	}
	bodyLen := int(binary.BigEndian.Uint16(h[4:6]))
	if len(b) != EthHeaderLen+HeaderLen+bodyLen+v.trailerLen() {
		return nil, fmt.Errorf("%w: header says %d body bytes, frame has %d", ErrLength, bodyLen, len(b)-EthHeaderLen-HeaderLen-v.trailerLen())
	}
	sealed := len(b) - v.trailerLen()
	if v.Role() == RoleVCPKey {
		if !ed25519.Verify(v.Public, b[:sealed], b[sealed:]) {
			return nil, ErrAuth
		}
	} else if !hmac.Equal(seal(v.Secret, b[:sealed]), b[sealed:]) {
		return nil, ErrAuth
	}
	// Reserved fields are covered by the HMAC, but a sender that set them
	// speaks a protocol we do not: refuse rather than guess.
	if h[3] != 0 || h[6] != 0 || h[7] != 0 {
		return nil, fmt.Errorf("%w: reserved header bits set", ErrMalformed)
	}
	msg, err := newMessage(MsgType(h[1]))
	if err != nil {
		return nil, err
	}
	// An element key seals what every element sends; what configures
	// takes the VCP's.
	if v.Role() != RoleVCPKey && !MsgType(h[1]).elementMay() {
		return nil, fmt.Errorf("%w: %s sealed with element key %d", ErrRole, MsgType(h[1]), h[2])
	}
	if err := msg.decodeBody(b[EthHeaderLen+HeaderLen : sealed]); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrMalformed, msg.Type(), err)
	}
	return &Frame{
		Dst: net.HardwareAddr(append([]byte(nil), b[0:6]...)),
		Src: net.HardwareAddr(append([]byte(nil), b[6:12]...)),
		Header: Header{
			Type:   MsgType(h[1]),
			KeyID:  h[2],
			Sender: binary.BigEndian.Uint64(h[8:16]),
			Epoch:  binary.BigEndian.Uint64(h[16:24]),
			Seq:    binary.BigEndian.Uint64(h[24:32]),
		},
		Msg: msg,
	}, nil
}
