// Package element is what every msr element's config file has in common
// (the LB's, the back-end's, the VCP's): its identity in DIST, its key,
// where its API answers, and its hello timing; decoded inline into each
// file's top struct (the same keys in every file) and completed by one
// defaults function.
package element

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/api"
	"github.com/msr-router/msr/internal/config"
	"github.com/msr-router/msr/internal/iflink"
	"github.com/msr-router/msr/internal/logging"
)

// Config is the common block.
type Config struct {
	Name string `yaml:"name" msr:"required"`
	// ID is the element id in DIST; default: a hash of the kind and name.
	ID uint64 `yaml:"id"`
	// KeyFile holds the element key (HMAC) every element seals its hellos
	// and probes with; KeyID names a line of it that names no id.
	KeyFile string `yaml:"key_file" msr:"required"`
	KeyID   uint8  `yaml:"key_id"`
	// VCPKeyFile is the VCP's key, which alone signs what configures an
	// element: its private half (vcp.key) on a VCP, the public half
	// (vcp.pub) on an LB or a back-end. Default: beside KeyFile.
	VCPKeyFile string `yaml:"vcp_key_file"`
	// StateDir is where the agent keeps what outlives a restart: the
	// DIST replay state. Default /var/lib/msr/KIND-NAME.
	StateDir string `yaml:"state_dir"`
	// Socket is the local API's Unix socket (default api.SocketPath).
	Socket string `yaml:"socket"`
	// Force is `--force` on the agent's command line: its data path loads
	// over maps a later build pinned (a downgrade), and starts empty the
	// maps whose layout changed beyond migrating (internal/xdp.Load).
	Force bool `yaml:"-"`
	// APIListen is the API's address on the management network
	// (HOST:PORT), beside the local socket; changes need the key's token.
	APIListen netip.AddrPort `yaml:"api_listen"`
	// APISecurity is the management API's TLS certificate, its read and
	// admin tokens and its public paths (internal/api/security.go).
	APISecurity api.Security `yaml:"api_security"`
	// APIInsecure lets the API leave the host without api_security: plain
	// http, reads open, changes with the DIST key's token. For a lab.
	APIInsecure bool `yaml:"api_insecure"`
	// HelloInterval is how often the element says hello; it is dead to
	// the others after HoldMultiplier intervals of silence.
	HelloInterval  time.Duration `yaml:"hello_interval"`
	HoldMultiplier uint8         `yaml:"hold_multiplier"`
	// Log is how the agent logs: level and format (internal/logging).
	Log logging.Config `yaml:"log"`
}

// Defaults.
const (
	DefaultHelloInterval  = 100 * time.Millisecond
	DefaultHoldMultiplier = 3
	DefaultKeyID          = 1
)

// Complete fills the defaults of an element of kind ("lb", "router",
// "vcp") and checks the block; errors are at pos, the file's.
func (c *Config) Complete(kind string, pos config.Pos) error {
	if err := dist.CheckName(c.Name); err != nil || c.Name == "" {
		return pos.Errorf("name %q: 1 to %d letters, digits and . _ - : / @ +", c.Name, dist.NameLen)
	}
	if c.ID == 0 {
		c.ID = dist.ElementID(kind, c.Name)
	}
	if c.KeyID == 0 {
		c.KeyID = DefaultKeyID
	}
	if c.VCPKeyFile == "" {
		c.VCPKeyFile = c.vcpKeyFile(kind == "vcp")
	}
	if c.StateDir == "" {
		c.StateDir = filepath.Join("/var/lib/msr", kind+"-"+c.Name)
	}
	if c.HelloInterval == 0 {
		c.HelloInterval = DefaultHelloInterval
	}
	if c.HoldMultiplier == 0 {
		c.HoldMultiplier = DefaultHoldMultiplier
	}
	if c.Socket == "" {
		c.Socket = api.SocketPath(kind, c.Name)
	}
	if c.HelloInterval < 10*time.Millisecond || c.HelloInterval > time.Minute {
		return pos.Errorf("hello_interval %v: use 10ms to 1m", c.HelloInterval)
	}
	if err := c.Log.Check(); err != nil {
		return pos.Errorf("%v", err)
	}
	if err := c.APISecurity.Check(); err != nil {
		return pos.Errorf("%v", err)
	}
	if c.APIListen.IsValid() && !c.APIListen.Addr().IsLoopback() && !c.APIInsecure && !c.APISecured() {
		return pos.Errorf("api_listen %s: the API would leave the host in plain http with no tokens; name api_security's cert, key and tokens (msr cert), or api_insecure: true", c.APIListen)
	}
	return nil
}

// Hold is how long the element stays alive to the others after its last
// hello.
func (c *Config) Hold() time.Duration { return c.HelloInterval * time.Duration(c.HoldMultiplier) }

// CapBurst is how many frames beyond its rate an element given a capacity
// takes at once (cap.h's tolerance): a NIC ring's worth, veth's 256, what
// a slower machine's receive ring would absorb.
const CapBurst = 256

// MaxCapacityPPS bounds capacity_pps: above it the cap's interval (1e9 /
// capacity) would round to nothing.
const MaxCapacityPPS = 100_000_000

// CapTiming is cap.h's bucket for a capacity of pps frames a second: the
// interval between frames and how far ahead of it a frame may come, in
// nanoseconds. 0 means no cap, and gives 0, 0.
func CapTiming(pps uint64) (intervalNs, toleranceNs uint64) {
	return GCRATiming(pps, CapBurst)
}

// GCRATiming is a cap.h bucket of pps frames a second letting burst frames
// through ahead of the rate: the interval between frames and the
// tolerance, in nanoseconds (0, 0 for no limit). The LB's control-plane
// policing's buckets take theirs from it too.
func GCRATiming(pps, burst uint64) (intervalNs, toleranceNs uint64) {
	if pps == 0 {
		return 0, 0
	}
	intervalNs = max(1e9/pps, 1)
	return intervalNs, burst * intervalNs
}

// CheckCapacity checks a capacity_pps from a file, at its position.
func CheckCapacity(pps uint64, pos config.Pos) error {
	if pps > MaxCapacityPPS {
		return pos.Errorf("capacity_pps %d: at most %d (0: no cap)", pps, MaxCapacityPPS)
	}
	return nil
}

// PortFlags are a HELLO's flags for a port in the link state s: up (the
// operational state), administratively up, full duplex.
func PortFlags(s iflink.State) uint8 {
	var f uint8
	if s.Up() {
		f |= dist.PortFlagUp
	}
	if s.AdminUp {
		f |= dist.PortFlagAdminUp
	}
	if s.FullDuplex {
		f |= dist.PortFlagFullDuplex
	}
	return f
}

// APISecured says whether the API has what it needs on the management
// network: TLS and its own read and admin tokens.
func (c *Config) APISecured() bool {
	return c.APISecurity.Cert != "" && c.APISecurity.ReadTokenFile != ""
}

// Keys are an element's DIST keys.
type Keys struct {
	// Seal is what its frames are sealed with: the element key, or on a
	// VCP the VCP's key.
	Seal dist.Key
	// Element is its element key, from which the RIB feed's password
	// is derived.
	Element dist.Key
	// Ring is every key it accepts: the element keys and the VCP's.
	Ring dist.Keyring
	// RIB is the RIB feed's TCP-MD5 password: rib.key beside KeyFile,
	// or, where there is none (a deployment from before it), derived
	// from the element key.
	RIB string
}

// Keys reads the element's key files; a VCP (vcp true) reads the VCP's
// private key, anything else its public key.
func (c *Config) Keys(vcp bool) (Keys, error) {
	id := c.KeyID
	if id == 0 { // a config not completed (a test's)
		id = DefaultKeyID
	}
	elems, err := dist.ReadKeys(c.KeyFile, id)
	if err != nil {
		return Keys{}, err
	}
	k := Keys{Seal: elems[0], Element: elems[0], Ring: dist.Ring(elems...)}
	var vcpRing dist.Keyring
	file := c.VCPKeyFile
	if file == "" {
		file = c.vcpKeyFile(vcp)
	}
	if vcp {
		priv, err := dist.ReadVCPKeys(file, dist.DefaultVCPKeyID)
		if err != nil {
			return Keys{}, err
		}
		k.Seal, vcpRing = priv[0], dist.Ring(priv...)
	} else if vcpRing, err = dist.ReadVCPPublic(file, dist.DefaultVCPKeyID); err != nil {
		return Keys{}, err
	}
	k.RIB = k.Element.RIBPassword()
	ribFile := filepath.Join(filepath.Dir(c.KeyFile), dist.RIBKeyFile)
	if raw, err := os.ReadFile(ribFile); err == nil {
		if k.RIB = strings.TrimSpace(string(raw)); len(k.RIB) != 40 || strings.Trim(k.RIB, "0123456789abcdef") != "" {
			return Keys{}, fmt.Errorf("%s: want 40 hex digits", ribFile)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return Keys{}, err
	}
	for id, v := range vcpRing {
		if _, ok := k.Ring[id]; ok {
			return Keys{}, fmt.Errorf("DIST key id %d names both an element key (%s) and the VCP's (%s)", id, c.KeyFile, file)
		}
		k.Ring[id] = v
	}
	return k, nil
}

// Rekey reads the key files again and gives sender and conns what they
// hold now: a step of a key rollover, taken at SIGHUP (docs/operations.md,
// "Rolling over DIST keys"). The RIB feed's password is not a DIST key
// and stays.
func (c *Config) Rekey(vcp bool, sender *dist.Sender, conns ...*dist.Conn) error {
	k, err := c.Keys(vcp)
	if err != nil {
		return err
	}
	if err := sender.Rekey(k.Seal); err != nil {
		return err
	}
	for _, conn := range conns {
		conn.Rekey(k.Ring)
	}
	return nil
}

func (c *Config) vcpKeyFile(vcp bool) string {
	name := dist.VCPPublicKeyFile
	if vcp {
		name = dist.VCPKeyFile
	}
	return filepath.Join(filepath.Dir(c.KeyFile), name)
}

// PersistReplay keeps conn's DIST replay state in StateDir (made 0700),
// a file per socket (port "" for an agent's only one): after a restart,
// an old captured stream replays as nothing. A config that names no
// StateDir (a test's, not completed) keeps none.
func (c *Config) PersistReplay(conn *dist.Conn, port string) error {
	if c.StateDir == "" {
		return nil
	}
	if err := os.MkdirAll(c.StateDir, 0o700); err != nil {
		return fmt.Errorf("state_dir: %w", err)
	}
	name := "dist-replay.json"
	if port != "" {
		name = "dist-replay-" + port + ".json"
	}
	return conn.PersistReplay(filepath.Join(c.StateDir, name))
}
