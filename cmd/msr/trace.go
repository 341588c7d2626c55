package main

import (
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"

	"github.com/msr-router/msr/internal/trace"
	"github.com/msr-router/msr/vcp/vcpapi"
)

// traceSpec reads trace's flags.
func traceSpec(src, dst, proto string, dport, count uint) (trace.Spec, error) {
	var s trace.Spec
	var err error
	if s.Src, err = netip.ParseAddr(src); err != nil {
		return s, fmt.Errorf("--src: %v", err)
	}
	if s.Dst, err = netip.ParseAddr(dst); err != nil {
		return s, fmt.Errorf("--dst: %v", err)
	}
	switch proto {
	case "":
	case "tcp":
		s.Proto = 6
	case "udp":
		s.Proto = 17
	case "icmp":
		s.Proto = 1
	case "icmpv6":
		s.Proto = 58
	default:
		n, err := strconv.ParseUint(proto, 10, 8)
		if err != nil {
			return s, fmt.Errorf("--proto %q: udp, tcp, icmp, icmpv6 or a number", proto)
		}
		s.Proto = uint8(n)
	}
	if dport > 65535 || count > trace.MaxCount {
		return s, fmt.Errorf("--dport %d or --count %d out of range", dport, count)
	}
	s.DPort, s.Count, s.ID = uint16(dport), uint32(count), 1 // the VCP draws the id
	return s, s.Check()
}

// traceWalks is `msr ctl trace`: the walks of the next packets that
// match, one a packet, stage by stage.
func (k *console) traceWalks(_ []string) error {
	k.trace.ID = 0
	res, err := k.c.Trace(k.trace, k.wait)
	if err != nil {
		return err
	}
	return k.print(res, func(w io.Writer) { writeWalks(w, res) })
}

func writeWalks(w io.Writer, res *vcpapi.TraceResult) {
	s := res.Spec
	what := s.Src.String() + " -> " + s.Dst.String()
	if s.Proto != 0 {
		what += " " + trace.ProtoName(s.Proto)
	}
	if s.DPort != 0 {
		what += fmt.Sprintf(" port %d", s.DPort)
	}
	fmt.Fprintf(w, "trace %s at %s: %d of %d packets seen\n", what, strings.Join(res.Elements, ", "), len(res.Walks), s.Count)
	for _, e := range res.Errors {
		fmt.Fprintf(w, "  not traced: %s\n", e)
	}
	for i, walk := range res.Walks {
		fmt.Fprintf(w, "\npacket %d: %s: %s\n", i+1, walk.Packet, walk.Ends)
		start := walk.Stages[0].At
		for _, e := range walk.Stages {
			ports := e.In
			if e.Out != "" {
				ports = strings.TrimSpace(ports + " -> " + e.Out)
			}
			verdict := e.Verdict
			if e.Reason != "" && e.Verdict != "sent" {
				verdict += " (" + e.Reason + ")"
			}
			fmt.Fprintf(w, "  %+9.3f ms  %-6s %-18s %-20s %s\n", float64(e.At.Sub(start).Microseconds())/1000, e.Element, ports, verdict, e.Decision)
		}
	}
}
