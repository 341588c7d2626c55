package bench

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/cilium/ebpf"

	"github.com/msr-router/msr/internal/netns"
	"github.com/msr-router/msr/lab"
	"github.com/msr-router/msr/labs"
	"github.com/msr-router/msr/traffic"
)

// ProgResult is what `msr bench prog` reports: the cost of one run of a
// data path program on a data frame, in the kernel's test run, beside the
// minimal forwarder (bpf/minfwd.bpf.c) measured in the same run.
type ProgResult struct {
	Program        string  `json:"program"`
	Repeat         uint32  `json:"repeat"`
	Rounds         int     `json:"rounds"`
	NsPerPacket    float64 `json:"ns_per_packet"`
	MinimalNs      float64 `json:"minimal_ns_per_packet"`
	Ratio          float64 `json:"ratio"`
	NsPerPacketMin float64 `json:"ns_per_packet_best"`
	MinimalNsMin   float64 `json:"minimal_ns_per_packet_best"`
}

// Prog measures the LB program on a 64-byte UDP data frame arriving on its
// external port, alternating with the minimal forwarder, rounds times, on
// the bench-lb lab's data path.
func Prog(repeat uint32, rounds int) (*ProgResult, error) {
	spec, err := labs.Load("bench-lb")
	if err != nil {
		return nil, err
	}
	if _, err := lab.Up(spec); err != nil {
		return nil, err
	}
	defer lab.Down(spec.Name)
	dp, undo, err := setupLB("lb", spec)
	if err != nil {
		return nil, err
	}
	defer undo()
	r := &ProgResult{Program: "lb", Repeat: repeat, Rounds: rounds}
	err = netns.Do(lab.Namespace(spec.Name, "dut"), func() error {
		in, err := net.InterfaceByName("e0")
		if err != nil {
			return err
		}
		out, err := net.InterfaceByName("i0")
		if err != nil {
			return err
		}
		unpin, err := pinGenerator()
		if err != nil {
			return err
		}
		defer unpin()
		min, err := newMinfwd(out, net.HardwareAddr{2, 0, 0, 0, 0, 1})
		if err != nil {
			return err
		}
		defer min.Close()
		frame := dataFrame(in.HardwareAddr)
		ctx := minfwdXdpMd{DataEnd: uint32(len(frame)), IngressIfindex: uint32(in.Index)}
		var lbSum, minSum time.Duration
		r.NsPerPacketMin, r.MinimalNsMin = 1e18, 1e18
		for i := 0; i < rounds; i++ {
			for _, p := range []struct {
				prog *ebpf.Program
				sum  *time.Duration
				best *float64
			}{{dp.Program(), &lbSum, &r.NsPerPacketMin}, {min.Minfwd, &minSum, &r.MinimalNsMin}} {
				d, err := benchmark(p.prog, frame, ctx, repeat)
				if err != nil {
					return err
				}
				*p.sum += d
				*p.best = minf(*p.best, float64(d.Nanoseconds()))
			}
		}
		r.NsPerPacket = float64(lbSum.Nanoseconds()) / float64(rounds)
		r.MinimalNs = float64(minSum.Nanoseconds()) / float64(rounds)
		r.Ratio = r.NsPerPacket / r.MinimalNs
		return nil
	})
	return r, err
}

func minf(a, b float64) float64 {
	if a < b {
		return a
	}
	return b
}

// benchmark returns the mean time of one run over repeat runs.
func benchmark(p *ebpf.Program, frame []byte, ctx minfwdXdpMd, repeat uint32) (time.Duration, error) {
	ret, err := p.Run(&ebpf.RunOptions{Data: frame, Context: ctx, Repeat: 1})
	if err != nil {
		return 0, err
	}
	if ret != 4 { // XDP_REDIRECT: the frame took the forwarding path
		return 0, fmt.Errorf("%s returned verdict %d on the data frame, not XDP_REDIRECT", p, ret)
	}
	start := time.Now()
	_, err = p.Run(&ebpf.RunOptions{Data: frame, Context: ctx, Repeat: repeat})
	if err != nil {
		return 0, fmt.Errorf("test run: %w", err)
	}
	return time.Since(start) / time.Duration(repeat), nil
}

// newMinfwd loads the minimal forwarder: every frame to dst out of out.
func newMinfwd(out *net.Interface, dst net.HardwareAddr) (*minfwdObjects, error) {
	spec, err := loadMinfwd()
	if err != nil {
		return nil, err
	}
	cfg := minfwdMinfwdConfig{Ifindex: uint32(out.Index)}
	copy(cfg.SrcMac[:], out.HardwareAddr)
	copy(cfg.DstMac[:], dst)
	if err := spec.Variables["cfg"].Set(cfg); err != nil {
		return nil, err
	}
	objs := &minfwdObjects{}
	if err := spec.LoadAndAssign(objs, nil); err != nil {
		return nil, fmt.Errorf("load minfwd: %w", err)
	}
	return objs, nil
}

// dataFrame is a 60-byte IPv4/UDP frame to dst, one flow of the bench.
func dataFrame(dst net.HardwareAddr) []byte {
	f := make([]byte, traffic.MinFrameSize-traffic.FCSLen)
	copy(f, dst)
	copy(f[6:], []byte{2, 0, 0, 0, 0, 9})
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	fl := traffic.FlowOf(7, len(f))
	ip := f[14:]
	ip[0], ip[8], ip[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(ip[2:], uint16(len(f)-14))
	binary.NativeEndian.PutUint32(ip[12:], fl.Saddr)
	binary.NativeEndian.PutUint32(ip[16:], fl.Daddr)
	binary.NativeEndian.PutUint16(ip[10:], fl.IpCheck)
	binary.NativeEndian.PutUint16(ip[20:], fl.Sport)
	binary.NativeEndian.PutUint16(ip[22:], fl.Dport)
	binary.BigEndian.PutUint16(ip[24:], uint16(len(f)-34))
	return f
}

// WriteText prints a result for people.
func (r *ProgResult) WriteText(w io.Writer) {
	fmt.Fprintf(w, "%s: %.1f ns/packet (best round %.1f); minimal forwarder %.1f ns/packet (best %.1f); ratio %.2f\n",
		r.Program, r.NsPerPacket, r.NsPerPacketMin, r.MinimalNs, r.MinimalNsMin, r.Ratio)
	fmt.Fprintf(w, "  %d rounds of %d runs each, alternating, one CPU\n", r.Rounds, r.Repeat)
}
