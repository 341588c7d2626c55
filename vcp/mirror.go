package vcp

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/msr-router/msr/internal/iflink"
	"github.com/msr-router/msr/internal/inet"
)

// Mirrors give the VCP's routing suite one interface per external port of
// the router, carrying that port's address, as if the ports were its own
// (the control plane sees the router's interfaces).
//
// Each mirror is a veth pair in the VCP's namespace: the suite side
// ("x<VLAN>") holds the port's address; the VCP holds the other side
// ("x<VLAN>b") with a packet socket. There is no kernel 802.1Q here
// (docs/lab.md), so the VCP bridges itself:
//
//   - a frame tagged with the port's VLAN arriving on the interconnect,
//     addressed to the VCP (routing or management from outside, which the
//     LB's Virtual-CP module sends) or broadcast (ARP replies the LBs relay),
//     is untagged and delivered to the suite side, unicast re-addressed to
//     the mirror;
//   - what the suite sends out of a mirror is tagged with its VLAN and sent
//     into the interconnect, where the LB owning the VLAN sends it out of
//     the port (its Int ARP rewrites ARP for it).
type Mirrors struct {
	internal int // packet socket on the interconnect
	mac      net.HardwareAddr
	mu       sync.Mutex
	ports    map[uint16]*mirror // by VLAN; Add and Remove change it while Run bridges
	counters map[string]uint64
	// run is Run's context while it bridges (nil before), and bridges
	// counts its goroutines, so that Add starts a mirror's own.
	run     context.Context
	bridges sync.WaitGroup
	// active: a standby VCP's mirrors send nothing out.
	active atomic.Bool
}

// SetActive lets the mirrors send into the interconnect (the active VCP),
// or not (a standby).
func (m *Mirrors) SetActive(active bool) { m.active.Store(active) }

type mirror struct {
	vlan  uint16
	name  string
	alias string           // the router's name of its port, once an LB said it
	mac   net.HardwareAddr // of the suite side
	// sock is the packet socket on the bridge side, non-blocking in the
	// runtime's poller: a thousand mirrors wait in goroutines, not in a
	// thousand OS threads blocked in recvfrom (each ~3 MB resident:
	// docs/scaling.md, the VCP at 1,035 ports).
	sock *os.File
	raw  syscall.RawConn
	down bool // taken down with its port (SetUp)
	// removed: Remove took it out; its outward bridge closes fd and ends.
	removed atomic.Bool
}

// Describe names the mirror of the port with the VLAN as the router names
// the port (lb1/e0): its interface alias, which `ip link` and the suite's
// interface views show. It says whether the name is new.
func (m *Mirrors) Describe(vlan uint16, name string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mr := m.ports[vlan]
	if mr == nil || mr.alias == name {
		return false, nil
	}
	mr.alias = name // tried once per name: a failure is reported, not retried every hello
	l, err := netlink.LinkByName(mr.name)
	if err == nil {
		err = netlink.LinkSetAlias(l, name)
	}
	if err != nil {
		return false, fmt.Errorf("name mirror %s %s: %w", mr.name, name, err)
	}
	return true, nil
}

// NewMirrors makes the mirrors of ports inside the calling thread's
// namespace and opens the packet sockets.
func NewMirrors(internal string, ports []ExternalPortConfig) (*Mirrors, error) {
	ifi, err := net.InterfaceByName(internal)
	if err != nil {
		return nil, fmt.Errorf("mirrors: %w", err)
	}
	m := &Mirrors{internal: -1, mac: ifi.HardwareAddr, ports: map[uint16]*mirror{}, counters: map[string]uint64{}}
	if m.internal, err = packetSocket(ifi.Index); err != nil {
		return nil, err
	}
	if err := unix.SetsockoptInt(m.internal, unix.SOL_PACKET, unix.PACKET_AUXDATA, 1); err != nil {
		m.Close()
		return nil, fmt.Errorf("mirrors: PACKET_AUXDATA: %w", err)
	}
	for _, p := range ports {
		mr, err := newMirror(p)
		if err != nil {
			m.Close()
			return nil, err
		}
		m.ports[p.VLAN] = mr
	}
	return m, nil
}

func newMirror(p ExternalPortConfig) (*mirror, error) {
	mr := &mirror{vlan: p.VLAN, name: fmt.Sprintf("x%d", p.VLAN)}
	bridge := mr.name + "b"
	if old, err := netlink.LinkByName(mr.name); err == nil {
		netlink.LinkDel(old) // a previous run's
	}
	fail := func(step string, err error) (*mirror, error) {
		return nil, fmt.Errorf("mirror of VLAN %d: %s: %w", p.VLAN, step, err)
	}
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: mr.name, MTU: int(p.mtu())}, PeerName: bridge}
	if err := netlink.LinkAdd(veth); err != nil {
		return fail("add veth "+mr.name, err)
	}
	// IPv6 before the link is up, so that the kernel makes no addresses
	// of its own: the bridge side none at all, the suite's side only the
	// port's (readdressMirror).
	setIPv6Sysctls(bridge, mr.name)
	if err := readdressMirror(p); err != nil {
		return nil, err
	}
	for _, name := range []string{bridge, mr.name} {
		if err := iflink.SetUp(name, true); err != nil {
			return fail("set up", err)
		}
	}
	// The suite's TCP and UDP checksums must be complete in the frame:
	// the bridge copies bytes, there is no "hardware" to finish them.
	if err := iflink.SetTxChecksum(mr.name, false); err != nil {
		return fail("checksums", err)
	}
	// netlink's one link by name, not net.InterfaceByName: that dumps
	// every link of the namespace, a thousand mirrors' each time
	// (docs/scaling.md, the VCP at 1,035 ports).
	l, err := netlink.LinkByName(mr.name)
	if err != nil {
		return fail("find", err)
	}
	mr.mac = l.Attrs().HardwareAddr
	b, err := netlink.LinkByName(bridge)
	if err != nil {
		return fail("find", err)
	}
	fd, err := packetSocket(b.Attrs().Index)
	if err != nil {
		return nil, err
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return fail("non-blocking socket", err)
	}
	mr.sock = os.NewFile(uintptr(fd), bridge)
	if mr.raw, err = mr.sock.SyscallConn(); err != nil {
		mr.sock.Close()
		return fail("socket", err)
	}
	return mr, nil
}

// setIPv6Sysctls readies a mirror's two sides for IPv6: the bridge side
// takes none; the suite's side makes no address of its own (the port's
// link-local one is its LB port MAC's EUI-64, which is not the mirror's
// MAC), runs no duplicate address detection (the LB answers for the
// port) and takes no router advertisements (the router is the router).
func setIPv6Sysctls(bridge, mirror string) {
	set := func(ifname, key, v string) {
		os.WriteFile("/proc/sys/net/ipv6/conf/"+ifname+"/"+key, []byte(v), 0)
	}
	set(bridge, "disable_ipv6", "1")
	set(mirror, "addr_gen_mode", "1")
	set(mirror, "accept_dad", "0")
	set(mirror, "accept_ra", "0")
	set(mirror, "autoconf", "0")
}

// readdressMirror gives a mirror its port's addresses (the only ones: the
// IPv4 one, and with an IPv6 one that and the port's link-local address)
// and MTU. A port without IPv6 has IPv6 off on its mirror: its chatter
// would only go out of the port.
func readdressMirror(p ExternalPortConfig) error {
	name := fmt.Sprintf("x%d", p.VLAN)
	l, err := netlink.LinkByName(name)
	if err != nil {
		return fmt.Errorf("mirror of VLAN %d: %w", p.VLAN, err)
	}
	v6 := "0"
	if !p.Address6.IsValid() {
		v6 = "1"
	}
	os.WriteFile("/proc/sys/net/ipv6/conf/"+name+"/disable_ipv6", []byte(v6), 0)
	want := []netip.Prefix{p.Address}
	if p.Address6.IsValid() {
		want = append(want, p.Address6, netip.PrefixFrom(inet.LinkLocal(p.mac), 64))
	}
	addrs, err := netlink.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		return fmt.Errorf("mirror of VLAN %d: list addresses: %w", p.VLAN, err)
	}
	for _, a := range addrs {
		have, ok := netip.AddrFromSlice(a.IP)
		ones, _ := a.Mask.Size()
		if ok && slices.Contains(want, netip.PrefixFrom(have.Unmap(), ones)) {
			continue
		}
		if err := netlink.AddrDel(l, &a); err != nil {
			return fmt.Errorf("mirror of VLAN %d: remove %s: %w", p.VLAN, a.IPNet, err)
		}
	}
	for _, w := range want {
		a, err := netlink.ParseAddr(w.String())
		if err != nil {
			return fmt.Errorf("mirror of VLAN %d: %w", p.VLAN, err)
		}
		if w.Addr().Is6() {
			a.Flags = unix.IFA_F_NODAD
		}
		if err := netlink.AddrReplace(l, a); err != nil {
			return fmt.Errorf("mirror of VLAN %d: address %s: %w", p.VLAN, w, err)
		}
	}
	if err := netlink.LinkSetMTU(l, int(p.mtu())); err != nil {
		return fmt.Errorf("mirror of VLAN %d: MTU %d: %w", p.VLAN, p.mtu(), err)
	}
	return nil
}

// Add makes the mirror of a port that joined while the VCP runs (an LB
// with new external ports), and bridges it if Run is bridging.
func (m *Mirrors) Add(p ExternalPortConfig) error {
	m.mu.Lock()
	_, ok := m.ports[p.VLAN]
	m.mu.Unlock()
	if ok {
		return fmt.Errorf("mirror of VLAN %d: already there", p.VLAN)
	}
	mr, err := newMirror(p) // netlink, outside the lock: the RTNL lock can take seconds
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ports[p.VLAN] = mr
	if m.run != nil {
		m.bridge(mr)
	}
	return nil
}

// Remove takes away the mirror of a port the config no longer has: the
// suite loses the interface, as a router does a line card's.
func (m *Mirrors) Remove(vlan uint16) error {
	m.mu.Lock()
	mr := m.ports[vlan]
	delete(m.ports, vlan)
	m.mu.Unlock()
	if mr == nil {
		return nil
	}
	mr.removed.Store(true)
	mr.sock.Close() // its outward bridge, if any, ends
	l, err := netlink.LinkByName(mr.name)
	if err == nil {
		err = netlink.LinkDel(l) // its peer, the bridge side, goes with it
	}
	if err != nil {
		return fmt.Errorf("remove mirror of VLAN %d: %w", vlan, err)
	}
	return nil
}

// SetUp brings the mirror of the port with the VLAN up or down with the
// port: its bridge side goes down, so the suite's side loses carrier, as
// a router's interface does when its cable is pulled, and the suite acts
// on it (BIRD's and FRR's link detection: connected routes withdrawn,
// OSPF's neighbours on it gone). It says whether the state changed.
func (m *Mirrors) SetUp(vlan uint16, up bool) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mr := m.ports[vlan]
	if mr == nil || mr.down == !up {
		return false, nil
	}
	mr.down = !up
	if err := iflink.SetUp(mr.name+"b", up); err != nil {
		return false, fmt.Errorf("mirror of VLAN %d: %w", vlan, err)
	}
	return true, nil
}

func packetSocket(ifindex int) (int, error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
	if err != nil {
		return -1, fmt.Errorf("packet socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifindex}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("bind packet socket: %w", err)
	}
	return fd, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// pollInterval bounds how long the interconnect's blocked receive waits
// before checking whether the bridge should stop (a packet socket's recv
// is not woken by close); the mirrors' sockets, in the poller, are.
const pollInterval = 200 * 1000 // microseconds

// Run bridges until ctx ends, then closes the sockets.
func (m *Mirrors) Run(ctx context.Context) {
	tv := unix.Timeval{Usec: pollInterval}
	unix.SetsockoptTimeval(m.internal, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	m.mu.Lock()
	m.run = ctx
	for _, mr := range m.ports {
		m.bridge(mr)
	}
	m.mu.Unlock()
	m.inward(ctx)
	m.Close() // the outward bridges end at their sockets' close
	m.bridges.Wait()
}

// bridge starts a mirror's outward bridge; call it with m.mu held.
func (m *Mirrors) bridge(mr *mirror) {
	m.bridges.Add(1)
	go func() {
		defer m.bridges.Done()
		m.outward(m.run, mr)
	}()
}

// inward takes tagged frames from the interconnect to the mirrors.
func (m *Mirrors) inward(ctx context.Context) {
	buf := make([]byte, 9216)
	oob := make([]byte, 256)
	for ctx.Err() == nil {
		n, oobn, _, from, err := unix.Recvmsg(m.internal, buf, oob, 0)
		if err != nil {
			m.recvFailed("inward", err)
			continue
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		vlan, frame, ok := untag(buf[:n], oob[:oobn])
		if !ok {
			continue
		}
		m.mu.Lock()
		mr := m.ports[vlan]
		m.mu.Unlock()
		if mr == nil {
			continue
		}
		dst := frame[0:6]
		switch {
		case bytes.Equal(dst, m.mac):
			copy(dst, mr.mac)
		case dst[0]&1 == 0:
			continue // another element's
		}
		var sendErr error
		err = mr.raw.Write(func(fd uintptr) bool {
			sendErr = unix.Send(int(fd), frame, 0)
			return !errors.Is(sendErr, unix.EAGAIN)
		})
		if err != nil || sendErr != nil {
			m.count("inward_errors")
			continue
		}
		m.count("inward")
	}
}

// untag returns a frame's VLAN and the frame without its tag, whether the
// tag is in the frame or (VLAN offload) in the packet's auxiliary data.
func untag(b, oob []byte) (uint16, []byte, bool) {
	if len(b) < 14 {
		return 0, nil, false
	}
	if binary.BigEndian.Uint16(b[12:]) == 0x8100 && len(b) >= 18 {
		vlan := binary.BigEndian.Uint16(b[14:]) & 0xfff
		out := append(append([]byte{}, b[:12]...), b[16:]...)
		return vlan, out, true
	}
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return 0, nil, false
	}
	for _, msg := range msgs {
		if msg.Header.Level == unix.SOL_PACKET && msg.Header.Type == unix.PACKET_AUXDATA && len(msg.Data) >= int(unsafe.Sizeof(unix.TpacketAuxdata{})) {
			aux := (*unix.TpacketAuxdata)(unsafe.Pointer(&msg.Data[0]))
			if aux.Status&unix.TP_STATUS_VLAN_VALID != 0 {
				return aux.Vlan_tci & 0xfff, append([]byte{}, b...), true
			}
		}
	}
	return 0, nil, false
}

// outward takes what the suite sends out of a mirror into the interconnect,
// tagged with the mirror's VLAN.
func (m *Mirrors) outward(ctx context.Context, mr *mirror) {
	buf := make([]byte, 9216)
	for ctx.Err() == nil && !mr.removed.Load() {
		var n int
		var from unix.Sockaddr
		var err error
		if rerr := mr.raw.Read(func(fd uintptr) bool {
			n, from, err = unix.Recvfrom(int(fd), buf, 0)
			return !errors.Is(err, unix.EAGAIN)
		}); rerr != nil {
			return // closed: removed, or the mirrors closed
		}
		if err != nil {
			m.recvFailed("outward", err)
			continue
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue // what inward delivered
		}
		if n < 14 {
			continue
		}
		if !m.active.Load() {
			m.count("outward_standby")
			continue
		}
		f := make([]byte, 0, n+4)
		f = append(f, buf[0:6]...)
		f = append(f, m.mac...)
		f = append(f, 0x81, 0x00, byte(mr.vlan>>8), byte(mr.vlan))
		f = append(f, buf[12:n]...)
		if err := unix.Send(m.internal, f, 0); err != nil {
			m.count("outward_errors")
			continue
		}
		m.count("outward")
	}
}

// recvFailed counts a receive that failed other than by its timeout or a
// signal. A packet socket reports once that its interface went down
// (ENETDOWN: SetUp took a mirror down with its port, or the interconnect
// bounced), and receives again when it is up: the bridge keeps going.
// Before it did, one port down at start-up ended that mirror's outward
// bridge for good, and the suite's OSPF and BGP on it never came up (seen
// as "No route to host" and OSPF alone in the bench's default lab on CI).
// The pause keeps an error that persists from spinning.
func (m *Mirrors) recvFailed(way string, err error) {
	if errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
		return
	}
	m.count(way + "_recv_errors")
	time.Sleep(10 * time.Millisecond)
}

func (m *Mirrors) count(what string) {
	m.mu.Lock()
	m.counters[what]++
	m.mu.Unlock()
}

// Counters returns frames bridged each way.
func (m *Mirrors) Counters() map[string]uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]uint64{}
	for k, v := range m.counters {
		out[k] = v
	}
	return out
}

// Close closes the sockets (the mirrors stay until the namespace goes or
// the next run replaces them). Call it after Run has returned, or instead
// of Run.
func (m *Mirrors) Close() {
	if m.internal >= 0 {
		unix.Close(m.internal)
		m.internal = -1
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, mr := range m.ports {
		mr.sock.Close() // a second close is harmless
	}
}
