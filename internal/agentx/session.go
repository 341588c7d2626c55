package agentx

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// A Handler gives the variables a session serves: all of them, at the
// time of the request (a snapshot; the session sorts it).
type Handler interface {
	Variables() []VarBind
}

// HandlerFunc is a function as a Handler.
type HandlerFunc func() []VarBind

// Variables calls f.
func (f HandlerFunc) Variables() []VarBind { return f() }

// Session is an open AgentX session with a master agent.
type Session struct {
	conn    net.Conn
	id      uint32
	handler Handler
	timeout time.Duration

	mu       sync.Mutex // serialises writes and guards the fields below
	packetID uint32
	waiting  map[uint32]chan response
	closed   chan struct{}
	err      error
}

type response struct {
	err       uint16
	idx       uint16
	sessionID uint32 // the master's id of the session (Open's response gives it)
}

// ErrClosed is returned by a session's calls once the master is gone.
var ErrClosed = errors.New("agentx: session closed")

// Dial connects to the master agent at the Unix socket path and opens a
// session identified by id and descr (the master logs them). The session
// answers the master's requests from h until it is closed.
func Dial(ctx context.Context, path string, id OID, descr string, h Handler) (*Session, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("agentx: dial %s: %w", path, err)
	}
	s := &Session{conn: conn, handler: h, timeout: 5 * time.Second, waiting: map[uint32]chan response{}, closed: make(chan struct{})}
	go s.read()
	// o.timeout (seconds the master waits for this subagent), o.id, o.descr.
	p := []byte{uint8(s.timeout / time.Second), 0, 0, 0}
	p = appendOID(p, id, false)
	p = appendOctets(p, []byte(descr))
	hdr, res, err := s.call(typeOpen, 0, p)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if res.err != errNone {
		conn.Close()
		return nil, fmt.Errorf("agentx: open refused: error %d", res.err)
	}
	s.mu.Lock()
	s.id = hdr.SessionID
	s.mu.Unlock()
	return s, nil
}

// Register asks the master to send requests for the subtree to this
// session; a lower priority value wins over another registration of the
// same subtree (the master's own modules use 127).
func (s *Session) Register(subtree OID, priority uint8) error {
	p := []byte{uint8(s.timeout / time.Second), priority, 0, 0}
	p = appendOID(p, subtree, false)
	_, res, err := s.call(typeRegister, 0, p)
	if err != nil {
		return err
	}
	if res.err != errNone {
		return fmt.Errorf("agentx: register %s: error %d", subtree, res.err)
	}
	return nil
}

// Notify sends a notification through the master to its trap sinks:
// snmpTrapOID.0 = trap, then the variables (the master adds sysUpTime.0).
func (s *Session) Notify(trap OID, vars ...VarBind) error {
	all := append([]VarBind{{Name: snmpTrapOID, Type: ObjectIdentifier, Value: trap}}, vars...)
	var p []byte
	for _, v := range all {
		var err error
		if p, err = appendVarBind(p, v); err != nil {
			return err
		}
	}
	_, res, err := s.call(typeNotify, 0, p)
	if err != nil {
		return err
	}
	if res.err != errNone {
		return fmt.Errorf("agentx: notify %s: error %d", trap, res.err)
	}
	return nil
}

// snmpTrapOID is snmpTrapOID.0 (SNMPv2-MIB).
var snmpTrapOID = MustOID("1.3.6.1.6.3.1.1.4.1.0")

// Ping asks the master whether the session is still there.
func (s *Session) Ping() error {
	_, res, err := s.call(typePing, 0, nil)
	if err == nil && res.err != errNone {
		err = fmt.Errorf("agentx: ping: error %d", res.err)
	}
	return err
}

// Done is closed when the session ends; Err then says why.
func (s *Session) Done() <-chan struct{} { return s.closed }

// Err is why the session ended (nil while it is open).
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close closes the session (reason: shutdown) and the connection.
func (s *Session) Close() error {
	s.mu.Lock()
	id := s.id
	s.mu.Unlock()
	s.send(header{Type: typeClose, SessionID: id}, []byte{closeShutdown, 0, 0, 0})
	return s.conn.Close()
}

// call sends an administrative PDU and waits for its response.
func (s *Session) call(typ uint8, flags uint8, payload []byte) (header, response, error) {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return header{}, response{}, s.err
	}
	s.packetID++
	h := header{Type: typ, Flags: flags, SessionID: s.id, PacketID: s.packetID}
	ch := make(chan response, 1)
	s.waiting[h.PacketID] = ch
	s.mu.Unlock()
	if err := s.send(h, payload); err != nil {
		return header{}, response{}, err
	}
	select {
	case r := <-ch:
		h.SessionID = r.sessionID
		return h, r, nil
	case <-s.closed:
		return header{}, response{}, s.Err()
	case <-time.After(s.timeout):
		s.mu.Lock()
		delete(s.waiting, h.PacketID)
		s.mu.Unlock()
		return header{}, response{}, fmt.Errorf("agentx: no response to PDU type %d in %v", typ, s.timeout)
	}
}

func (s *Session) send(h header, payload []byte) error {
	b := appendPDU(make([]byte, 0, headerLen+len(payload)), h, payload)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conn.SetWriteDeadline(time.Now().Add(s.timeout))
	if _, err := s.conn.Write(b); err != nil {
		return fmt.Errorf("agentx: write: %w", err)
	}
	return nil
}

// read receives PDUs until the connection ends: responses go to their
// callers, requests are answered.
func (s *Session) read() {
	var err error
	for {
		var h header
		var payload []byte
		if h, payload, err = readPDU(s.conn); err != nil {
			break
		}
		if h.Type == typeResponse {
			s.deliver(h, payload)
			continue
		}
		if h.Type == typeClose {
			err = errors.New("agentx: the master closed the session")
			break
		}
		if err = s.answer(h, payload); err != nil {
			break
		}
	}
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		err = ErrClosed
	}
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
	close(s.closed)
	s.conn.Close()
}

// readPDU reads one PDU.
func readPDU(r io.Reader) (header, []byte, error) {
	var hb [headerLen]byte
	if _, err := io.ReadFull(r, hb[:]); err != nil {
		return header{}, nil, err
	}
	h, err := parseHeader(hb[:])
	if err != nil {
		return header{}, nil, err
	}
	payload := make([]byte, h.PayloadLen)
	if _, err := io.ReadFull(r, payload); err != nil {
		return header{}, nil, err
	}
	return h, payload, nil
}

// deliver hands a response to the call waiting for it.
func (s *Session) deliver(h header, payload []byte) {
	r := reader{b: payload, o: h.order()}
	r.u32() // res.sysUpTime
	res := response{err: r.u16(), idx: r.u16(), sessionID: h.SessionID}
	s.mu.Lock()
	ch := s.waiting[h.PacketID]
	delete(s.waiting, h.PacketID)
	s.mu.Unlock()
	if ch != nil {
		ch <- res
	}
}

// answer responds to one request from the master.
func (s *Session) answer(h header, payload []byte) error {
	vars, resErr, idx := s.serve(h, payload)
	if h.Type == typeCleanupSet {
		return nil // no response (§7.2.4.4)
	}
	p := make([]byte, 4, 64)
	p = binary.BigEndian.AppendUint16(p, resErr)
	p = binary.BigEndian.AppendUint16(p, idx)
	for _, v := range vars {
		var err error
		if p, err = appendVarBind(p, v); err != nil {
			// A handler's bad value: say genErr for the request rather than
			// send a malformed PDU.
			p = binary.BigEndian.AppendUint16(make([]byte, 4, 8), errProcessing)
			p = binary.BigEndian.AppendUint16(p, 0)
			break
		}
	}
	return s.send(header{Type: typeResponse, SessionID: h.SessionID, TransactionID: h.TransactionID, PacketID: h.PacketID}, p)
}

// serve computes a request's variables, or its error and the index of
// the variable that caused it.
func (s *Session) serve(h header, payload []byte) ([]VarBind, uint16, uint16) {
	r := reader{b: payload, o: h.order()}
	r.skipContext(h)
	switch h.Type {
	case typeGet, typeGetNext, typeGetBulk:
		var nonRep, maxRep int
		if h.Type == typeGetBulk {
			nonRep, maxRep = int(r.u16()), int(r.u16())
		}
		var ranges []searchRange
		for len(r.b) > 0 && r.err == nil {
			ranges = append(ranges, r.searchRange())
		}
		if r.err != nil {
			return nil, errParse, 0
		}
		w := newView(s.handler.Variables())
		var out []VarBind
		switch h.Type {
		case typeGet:
			for _, sr := range ranges {
				out = append(out, w.get(sr.Start))
			}
		case typeGetNext:
			for _, sr := range ranges {
				out = append(out, w.next(sr))
			}
		default:
			out = w.bulk(nonRep, maxRep, ranges)
		}
		return out, errNone, 0
	case typeTestSet:
		return nil, errNotWritable, 1 // read-only: every set is refused
	case typeCommitSet, typeUndoSet, typeCleanupSet:
		return nil, errNone, 0
	default:
		return nil, errParse, 0
	}
}
