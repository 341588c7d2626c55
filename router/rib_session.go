package router

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"golang.org/x/sys/unix"
)

// The RIB feed's session with the VCP: its TCP-MD5 connection, the
// OPEN and its capabilities, KEEPALIVEs, and reading messages off the
// wire. What an UPDATE says is rib_update.go's; what the feed does with
// it, rib.go's.

// session runs one BGP session until it fails or ctx ends.
func (f *ribFeed) session(ctx context.Context) error {
	c, err := dialRIB(ctx, netip.AddrPortFrom(f.cfg.Neighbor, 179), f.cfg.password)
	if err != nil {
		return err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	if err := c.send(f.open()); err != nil {
		return err
	}
	f.setState("open")
	s := &ribSession{f: f, c: c, hold: ribHoldTime * time.Second, keepalives: make(chan struct{})}
	defer close(s.keepalives)
	for {
		msg, err := s.read()
		if err == nil {
			err = s.handle(msg)
		}
		if err != nil {
			return err
		}
	}
}

// ribConn is a session's connection. Messages are sent whole, from the
// session and from its keepalive timer.
type ribConn struct {
	net.Conn
	wmu sync.Mutex
}

// dialRIB connects to the suite, signing every segment with password
// (TCP-MD5) when there is one.
func dialRIB(ctx context.Context, to netip.AddrPort, password string) (*ribConn, error) {
	d := net.Dialer{Timeout: 3 * time.Second}
	if password != "" {
		d.Control = func(_, _ string, rc syscall.RawConn) error {
			sig := unix.TCPMD5Sig{Keylen: uint16(len(password))}
			copy(sig.Key[:], password)
			sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(&sig.Addr))
			sa.Family, sa.Addr = unix.AF_INET, to.Addr().As4()
			var serr error
			err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptTCPMD5Sig(int(fd), unix.IPPROTO_TCP, unix.TCP_MD5SIG, &sig) })
			return cmp.Or(err, serr)
		}
	}
	conn, err := d.DialContext(ctx, "tcp", to.String())
	if err != nil {
		return nil, err
	}
	return &ribConn{Conn: conn}, nil
}

func (c *ribConn) send(m *bgp.BGPMessage) error {
	b, err := m.Serialize()
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.SetWriteDeadline(time.Now().Add(ribHoldTime * time.Second))
	_, err = c.Write(b)
	return err
}

// ribSession is one session's BGP state (RFC 4271 §8, the receiving side
// of it: we never send UPDATEs).
type ribSession struct {
	f           *ribFeed
	c           *ribConn
	hold        time.Duration // agreed in the OPENs; 0: no keepalives
	opt         *bgp.MarshallingOption
	established bool
	keepalives  chan struct{} // closed when the session ends
}

// read reads the next message within the hold time; a malformed one is
// answered with its NOTIFICATION.
func (s *ribSession) read() (*bgp.BGPMessage, error) {
	if s.hold > 0 {
		s.c.SetReadDeadline(time.Now().Add(s.hold))
	}
	msg, err := readBGP(s.c, s.opt)
	var me *bgp.MessageError
	if errors.As(err, &me) {
		s.c.send(bgp.NewBGPNotificationMessage(me.TypeCode, me.SubTypeCode, me.Data))
	}
	return msg, err
}

// handle takes one message; an error ends the session.
func (s *ribSession) handle(msg *bgp.BGPMessage) error {
	switch body := msg.Body.(type) {
	case *bgp.BGPOpen:
		return s.opened(body)
	case *bgp.BGPKeepAlive:
		if !s.established {
			s.established = true
			s.f.setEstablished()
		}
	case *bgp.BGPUpdate:
		if !s.established {
			return errors.New("UPDATE before the session was established")
		}
		s.f.update(body)
	case *bgp.BGPNotification:
		return fmt.Errorf("the suite closed the session: NOTIFICATION %d/%d", body.ErrorCode, body.ErrorSubcode)
	}
	return nil
}

// opened takes the suite's OPEN: the capabilities agreed, a KEEPALIVE to
// confirm, and keepalives every third of the hold time from then on.
func (s *ribSession) opened(o *bgp.BGPOpen) error {
	hold, opt, err := s.f.opened(o)
	if err != nil {
		s.c.send(bgp.NewBGPNotificationMessage(bgp.BGP_ERROR_OPEN_MESSAGE_ERROR, bgp.BGP_ERROR_SUB_BAD_PEER_AS, nil))
		return err
	}
	s.hold, s.opt = hold, opt
	if err := s.c.send(bgp.NewBGPKeepAliveMessage()); err != nil {
		return err
	}
	if hold > 0 {
		go s.keepAlive()
	}
	return nil
}

// keepAlive sends a KEEPALIVE every third of the hold time until the
// session ends.
func (s *ribSession) keepAlive() {
	t := time.NewTicker(s.hold / 3)
	defer t.Stop()
	for {
		select {
		case <-s.keepalives:
			return
		case <-t.C:
			if s.c.send(bgp.NewBGPKeepAliveMessage()) != nil {
				return
			}
		}
	}
}

// setState and setEstablished keep the feed's status.
func (f *ribFeed) setState(state string) {
	f.mu.Lock()
	f.st.State = state
	f.mu.Unlock()
}

func (f *ribFeed) setEstablished() {
	f.mu.Lock()
	f.st.State, f.st.Established, f.st.LastError = "established", time.Now().UTC().Format(time.RFC3339), ""
	f.st.Sessions++
	f.eors = 0
	f.tableArrived.Store(0)
	f.arrived = true
	f.mu.Unlock()
	if f.arriving != nil {
		f.arriving()
	}
	f.log.Info("RIB feed established")
}

// open is our OPEN: IPv4 and IPv6 unicast, 4-octet AS, graceful restart
// (our forwarding state survives our own restarts: the FIB is pinned),
// ADD-PATH receive, for both families.
func (f *ribFeed) open() *bgp.BGPMessage {
	as2 := uint16(bgp.AS_TRANS)
	if f.cfg.ASN <= 0xffff {
		as2 = uint16(f.cfg.ASN)
	}
	caps := []bgp.ParameterCapabilityInterface{
		bgp.NewCapMultiProtocol(bgp.RF_IPv4_UC),
		bgp.NewCapMultiProtocol(bgp.RF_IPv6_UC),
		bgp.NewCapFourOctetASNumber(f.cfg.ASN),
		bgp.NewCapGracefulRestart(false, false, ribRestartTime, []*bgp.CapGracefulRestartTuple{
			bgp.NewCapGracefulRestartTuple(bgp.RF_IPv4_UC, true), bgp.NewCapGracefulRestartTuple(bgp.RF_IPv6_UC, true)}),
		bgp.NewCapAddPath([]*bgp.CapAddPathTuple{
			bgp.NewCapAddPathTuple(bgp.RF_IPv4_UC, bgp.BGP_ADD_PATH_RECEIVE), bgp.NewCapAddPathTuple(bgp.RF_IPv6_UC, bgp.BGP_ADD_PATH_RECEIVE)}),
	}
	m, _ := bgp.NewBGPOpenMessage(as2, ribHoldTime, f.routerID, []bgp.OptionParameterInterface{bgp.NewOptionParameterCapability(caps)})
	return m
}

// opened checks the suite's OPEN and agrees on the hold time, ADD-PATH
// and graceful restart.
func (f *ribFeed) opened(o *bgp.BGPOpen) (time.Duration, *bgp.MarshallingOption, error) {
	asn := uint32(o.MyAS)
	addPath, gr := false, false
	var families uint8 // agreed by multiprotocol capabilities; none: IPv4 alone (RFC 4760)
	addPaths := map[bgp.Family]bgp.BGPAddPathMode{}
	var grTime uint16
	for _, p := range o.OptParams {
		c, ok := p.(*bgp.OptionParameterCapability)
		if !ok {
			continue
		}
		for _, cap := range c.Capability {
			switch v := cap.(type) {
			case *bgp.CapFourOctetASNumber:
				asn = v.CapValue
			case *bgp.CapMultiProtocol:
				switch v.CapValue {
				case bgp.RF_IPv4_UC:
					families |= 1
				case bgp.RF_IPv6_UC:
					families |= 2
				}
			case *bgp.CapAddPath:
				for _, t := range v.Tuples {
					if (t.Family == bgp.RF_IPv4_UC || t.Family == bgp.RF_IPv6_UC) && t.Mode&bgp.BGP_ADD_PATH_SEND != 0 {
						addPaths[t.Family] = bgp.BGP_ADD_PATH_RECEIVE
					}
				}
				addPath = addPaths[bgp.RF_IPv4_UC] != 0
			case *bgp.CapGracefulRestart:
				for _, t := range v.Tuples {
					gr = gr || t.AFI == bgp.AFI_IP && t.SAFI == bgp.SAFI_UNICAST
				}
				grTime = v.Time
			}
		}
	}
	if asn != f.cfg.ASN {
		return 0, nil, fmt.Errorf("the suite is AS %d, not our AS %d (iBGP)", asn, f.cfg.ASN)
	}
	hold := min(time.Duration(o.HoldTime), ribHoldTime) * time.Second
	if o.HoldTime == 0 {
		hold = 0
	}
	var opt *bgp.MarshallingOption
	if len(addPaths) > 0 {
		opt = &bgp.MarshallingOption{AddPath: addPaths}
	}
	if families == 0 {
		families = 1
	}
	f.mu.Lock()
	f.st.AddPath, f.st.GR = addPath, gr
	f.families = families
	f.mu.Unlock()
	f.log.Info("RIB feed open", "hold", hold, "add_path", addPath, "graceful_restart", gr, "restart_time", grTime)
	return hold, opt, nil
}

// readBGP reads one message.
func readBGP(r io.Reader, opt *bgp.MarshallingOption) (*bgp.BGPMessage, error) {
	var hdr [bgp.BGP_HEADER_LENGTH]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := int(hdr[16])<<8 | int(hdr[17])
	if n < bgp.BGP_HEADER_LENGTH || n > bgp.BGP_MAX_MESSAGE_LENGTH {
		return nil, bgp.NewMessageError(bgp.BGP_ERROR_MESSAGE_HEADER_ERROR, bgp.BGP_ERROR_SUB_BAD_MESSAGE_LENGTH, hdr[16:18], fmt.Sprintf("message of %d bytes", n))
	}
	b := make([]byte, n)
	copy(b, hdr[:])
	if _, err := io.ReadFull(r, b[bgp.BGP_HEADER_LENGTH:]); err != nil {
		return nil, err
	}
	if opt == nil {
		return bgp.ParseBGPMessage(b)
	}
	return bgp.ParseBGPMessage(b, opt)
}
