// Package iflink reads a network interface's state from the kernel — its
// administrative state, carrier, MTU, speed and duplex — follows its
// changes, and sets what the agents set on their own interfaces, through
// rtnetlink (vishvananda/netlink) and the ethtool ioctl rather than the
// ip and ethtool commands.
//
// A port is operationally up when it is administratively up and has
// carrier (IFF_UP and IFF_LOWER_UP): RFC 2863's ifOperStatus "up". A veth
// loses carrier when its peer goes down, a physical port when its cable
// does.
package iflink

import (
	"fmt"
	"net"
	"time"
	"unsafe"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// State is an interface as the kernel reports it.
type State struct {
	Name    string `json:"name"`
	Index   int    `json:"index"`
	AdminUp bool   `json:"admin_up"`
	Carrier bool   `json:"carrier"`
	// OperState is RFC 2863's, as the kernel names it (up, down,
	// lowerlayerdown, dormant, unknown...).
	OperState string `json:"oper_state"`
	MTU       int    `json:"mtu"`
	// SpeedMbps is 0 where the driver does not say (SPEED_UNKNOWN).
	SpeedMbps  uint32 `json:"speed_mbps"`
	FullDuplex bool   `json:"full_duplex"`
}

// Up says whether the port can carry traffic: administratively up with
// carrier.
func (s State) Up() bool { return s.AdminUp && s.Carrier }

// Read returns the interface's state now.
func Read(name string) (State, error) {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return State{}, fmt.Errorf("link %s: %w", name, err)
	}
	return stateOf(l), nil
}

func stateOf(l netlink.Link) State {
	a := l.Attrs()
	s := State{Name: a.Name, Index: a.Index, AdminUp: a.Flags&net.FlagUp != 0, Carrier: a.RawFlags&unix.IFF_LOWER_UP != 0,
		OperState: a.OperState.String(), MTU: a.MTU}
	s.SpeedMbps, s.FullDuplex = speed(a.Name)
	return s
}

// Watch calls fn with an interface's state whenever the kernel reports a
// change of one of names (and once for each at the start), until done is
// closed. It runs in the calling thread's network namespace.
func Watch(names []string, done <-chan struct{}, fn func(State)) error {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	updates := make(chan netlink.LinkUpdate, 64)
	errs := make(chan error, 1)
	err := netlink.LinkSubscribeWithOptions(updates, done, netlink.LinkSubscribeOptions{ListExisting: true,
		ErrorCallback: func(err error) {
			select {
			case errs <- err:
			default:
			}
		}})
	if err != nil {
		return fmt.Errorf("subscribe to link changes: %w", err)
	}
	go func() {
		for {
			select {
			case u, ok := <-updates:
				if !ok {
					return
				}
				if u.Link != nil && want[u.Link.Attrs().Name] && u.Header.Type == unix.RTM_NEWLINK {
					fn(stateOf(u.Link))
				}
			case <-done:
				return
			}
		}
	}()
	return nil
}

// Poll calls fn when an interface's state differs from what it was at the
// last look, every interval until done is closed: for what netlink's
// events may miss (a subscription that overflowed).
func Poll(names []string, interval time.Duration, done <-chan struct{}, fn func(State)) {
	last := map[string]State{}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		for _, n := range names {
			s, err := Read(n)
			if err == nil && s != last[n] {
				last[n] = s
				fn(s)
			}
		}
		select {
		case <-done:
			return
		case <-t.C:
		}
	}
}

// SetUp sets an interface administratively up or down.
func SetUp(name string, up bool) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return fmt.Errorf("link %s: %w", name, err)
	}
	if up {
		err = netlink.LinkSetUp(l)
	} else {
		err = netlink.LinkSetDown(l)
	}
	if err != nil {
		return fmt.Errorf("set %s up=%v: %w", name, up, err)
	}
	return nil
}

// The ethtool ioctl (linux/ethtool.h, linux/sockios.h).
const (
	siocEthtool     = 0x8946
	ethtoolGSet     = 0x00000001 // struct ethtool_cmd
	ethtoolSTxCsum  = 0x00000017 // struct ethtool_value
	speedUnknown    = 0xffffffff
	duplexFull      = 0x01
	ethtoolCmdBytes = 44
)

// ifreq is struct ifreq with ifr_data: the name and a pointer, padded to
// the union's 24 bytes. The pointer stays a pointer (not a uintptr) so
// that the buffer it names is kept and moved with it.
type ifreq struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [16]byte
}

func ethtool(name string, buf unsafe.Pointer) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var ifr ifreq
	copy(ifr.name[:unix.IFNAMSIZ-1], name)
	ifr.data = buf
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), siocEthtool, uintptr(unsafe.Pointer(&ifr))); errno != 0 {
		return errno
	}
	return nil
}

// speed is the link's speed and duplex from ETHTOOL_GSET (the kernel
// answers it from the driver's link settings); 0 and half where the
// driver does not say.
func speed(name string) (uint32, bool) {
	var cmd [ethtoolCmdBytes]byte
	*(*uint32)(unsafe.Pointer(&cmd[0])) = ethtoolGSet
	if err := ethtool(name, unsafe.Pointer(&cmd[0])); err != nil {
		return 0, false
	}
	// struct ethtool_cmd: speed at 12 (u16), duplex at 14, speed_hi at 28.
	lo := uint32(*(*uint16)(unsafe.Pointer(&cmd[12])))
	hi := uint32(*(*uint16)(unsafe.Pointer(&cmd[28])))
	s := hi<<16 | lo
	if s == speedUnknown {
		s = 0
	}
	return s, cmd[14] == duplexFull
}

// SetTxChecksum turns the interface's transmit checksum offload on or off
// (ethtool -K NAME tx on|off): a frame a packet socket reads off a veth
// carries whatever the sender left in it, and nothing finishes a partial
// checksum on the way.
func SetTxChecksum(name string, on bool) error {
	v := struct{ cmd, data uint32 }{cmd: ethtoolSTxCsum}
	if on {
		v.data = 1
	}
	if err := ethtool(name, unsafe.Pointer(&v)); err != nil {
		return fmt.Errorf("ethtool -K %s tx %v: %w", name, on, err)
	}
	return nil
}
