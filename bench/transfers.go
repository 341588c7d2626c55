package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot/plotter"

	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/lab"
	"github.com/msr-router/msr/labs"
)

// TransferOptions is `msr bench transfers`: real transfers across msr
// and across a Linux router.
// A file of SizeMB is fetched Count times over HTTP (nginx, curl) and FTP
// (vsftpd, the ftp client) from a server behind each router by a client
// behind it, the routers and protocols interleaved round by round.
type TransferOptions struct {
	DUTs      []string
	Protocols []string
	SizeMB    int
	Count     int
	// MSR is the msr binary the whole router's lab runs (its agents).
	MSR string
}

// TransferDUTs and TransferProtocols are what the options take.
var (
	TransferDUTs      = []string{"linux", "msr"}
	TransferProtocols = []string{"http", "ftp"}
)

// TransferResult is the transfers, and per router and protocol their
// times.
type TransferResult struct {
	Options   TransferOptions   `json:"options"`
	Transfers []Transfer        `json:"transfers"`
	Summary   []TransferSummary `json:"summary"`
	Machine   string            `json:"machine"`
	Seconds   float64           `json:"seconds"`
	Figures   []Plot            `json:"figures,omitempty"`
}

// Transfer is one file fetched: how long it took, and whether what
// arrived is what was served (its SHA-256).
type Transfer struct {
	DUT      string  `json:"dut"`
	Protocol string  `json:"protocol"`
	Round    int     `json:"round"`
	Seconds  float64 `json:"seconds"`
	Mbps     float64 `json:"mbps"`
	Intact   bool    `json:"intact"`
}

// TransferSummary is a router's and protocol's transfers.
type TransferSummary struct {
	DUT           string  `json:"dut"`
	Protocol      string  `json:"protocol"`
	MedianSeconds float64 `json:"median_s"`
	MinSeconds    float64 `json:"min_s"`
	MaxSeconds    float64 `json:"max_s"`
	MedianMbps    float64 `json:"median_mbps"`
	Intact        int     `json:"intact"` // of Count
}

// A transferLab is a router's lab with a client and a server behind it.
type transferLab struct {
	name           string // the lab's
	client, server string // hosts
	serverAddr     string
	down           func()
}

// transferDir holds the served file and the servers' configurations.
const transferDir = "/tmp/msr-transfers"

func (o *TransferOptions) complete() error {
	for _, d := range o.DUTs {
		if !slices.Contains(TransferDUTs, d) {
			return fmt.Errorf("transfers: DUT %q: use %v", d, TransferDUTs)
		}
	}
	for _, p := range o.Protocols {
		if !slices.Contains(TransferProtocols, p) {
			return fmt.Errorf("transfers: protocol %q: use %v", p, TransferProtocols)
		}
	}
	if len(o.DUTs) == 0 || len(o.Protocols) == 0 || o.SizeMB < 1 || o.Count < 1 {
		return fmt.Errorf("transfers: name the routers and protocols, a size of at least 1 MB and at least one transfer")
	}
	if slices.Contains(o.DUTs, "msr") && o.MSR == "" {
		return fmt.Errorf("transfers: msr's lab needs the msr binary")
	}
	return nil
}

// Transfers runs the transfers.
func Transfers(o TransferOptions, progress io.Writer) (*TransferResult, error) {
	start := time.Now()
	if err := o.complete(); err != nil {
		return nil, err
	}
	sum, err := serveFile(o.SizeMB)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(transferDir)
	labs := map[string]*transferLab{}
	defer func() {
		for _, l := range labs {
			l.down()
		}
	}()
	for _, dut := range o.DUTs {
		l, err := upTransferLab(dut, o.MSR, progress)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", dut, err)
		}
		labs[dut] = l
		if err := l.startServers(); err != nil {
			return nil, fmt.Errorf("%s: %w", dut, err)
		}
	}
	res := &TransferResult{Options: o, Machine: machine()}
	for round := 1; round <= o.Count; round++ {
		for _, dut := range o.DUTs {
			for _, proto := range o.Protocols {
				t, err := labs[dut].fetch(proto, o.SizeMB, sum)
				if err != nil {
					return nil, fmt.Errorf("%s, %s: %w", dut, proto, err)
				}
				t.DUT, t.Protocol, t.Round = dut, proto, round
				res.Transfers = append(res.Transfers, *t)
				fmt.Fprintf(progress, "  %-6s %-4s %2d: %d MB in %.3f s (%.0f Mbit/s), intact %v\n", dut, proto, round, o.SizeMB, t.Seconds, t.Mbps, t.Intact)
			}
		}
	}
	for _, dut := range o.DUTs {
		for _, proto := range o.Protocols {
			s := TransferSummary{DUT: dut, Protocol: proto}
			var secs, mbps []float64
			for _, t := range res.Transfers {
				if t.DUT == dut && t.Protocol == proto {
					secs, mbps = append(secs, t.Seconds), append(mbps, t.Mbps)
					if t.Intact {
						s.Intact++
					}
				}
			}
			s.MedianSeconds, s.MinSeconds, s.MaxSeconds, s.MedianMbps = median(secs), slices.Min(secs), slices.Max(secs), median(mbps)
			res.Summary = append(res.Summary, s)
		}
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// serveFile writes SizeMB random bytes as the served file, and returns
// their SHA-256.
func serveFile(sizeMB int) ([sha256.Size]byte, error) {
	data := make([]byte, sizeMB<<20)
	rand.Read(data)
	www := filepath.Join(transferDir, "www")
	if err := os.MkdirAll(www, 0o755); err != nil {
		return [sha256.Size]byte{}, err
	}
	// The servers' workers run as www-data and ftp: every directory on
	// the way must be theirs to enter.
	os.Chmod(transferDir, 0o755)
	return sha256.Sum256(data), os.WriteFile(filepath.Join(www, "file.bin"), data, 0o644)
}

// upTransferLab brings up a router's lab: Linux's (labs/compare-linux.yaml)
// or the whole msr router's (the default lab, converged; client h1 and
// server h3, behind different LBs).
func upTransferLab(dut, msr string, progress io.Writer) (*transferLab, error) {
	if dut == "msr" {
		demo.Down() // a lab left from an earlier run
		plan, err := demo.Up(msr, 10)
		if err != nil {
			demo.Down()
			return nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := demo.Wait(ctx, plan, progress); err != nil {
			demo.Down()
			return nil, err
		}
		return &transferLab{name: demo.LabName, client: "h1", server: "h3", serverAddr: demo.H3, down: func() { demo.Down() }}, nil
	}
	spec, err := labs.Load("compare-linux")
	if err != nil {
		return nil, err
	}
	lab.Down(spec.Name)
	if _, err := lab.Up(spec); err != nil {
		lab.Down(spec.Name)
		return nil, err
	}
	return &transferLab{name: spec.Name, client: "client", server: "server", serverAddr: "10.3.0.2", down: func() { lab.Down(spec.Name) }}, nil
}

// exec runs a command in a host of the lab.
func (l *transferLab) exec(host string, stdin io.Reader, argv ...string) (string, error) {
	var out bytes.Buffer
	code, err := lab.Exec(l.name, host, argv, stdin, &out, &out)
	if err == nil && code != 0 {
		err = fmt.Errorf("%s: %s exited %d: %s", host, strings.Join(argv, " "), code, strings.TrimSpace(out.String()))
	}
	return out.String(), err
}

// startServers starts nginx and vsftpd on the server host, serving
// transferDir/www; the lab's teardown kills them with its namespaces'
// processes.
func (l *transferLab) startServers() error {
	dir := filepath.Join(transferDir, l.name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	www := filepath.Join(transferDir, "www")
	nginx := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(nginx, []byte(`daemon on;
pid `+dir+`/nginx.pid;
error_log `+dir+`/nginx.log;
events {}
http {
	access_log off;
	sendfile on;
	server { listen `+l.serverAddr+`:80; root `+www+`; }
}
`), 0o644); err != nil {
		return err
	}
	// Anonymous, read-only, passive; the seccomp sandbox off, since the
	// server runs in a network namespace of its own.
	vsftpd := filepath.Join(dir, "vsftpd.conf")
	if err := os.WriteFile(vsftpd, []byte(`listen=YES
listen_address=`+l.serverAddr+`
background=YES
anonymous_enable=YES
no_anon_password=YES
anon_root=`+www+`
local_enable=NO
write_enable=NO
pasv_enable=YES
pasv_min_port=40000
pasv_max_port=40100
seccomp_sandbox=NO
xferlog_enable=NO
vsftpd_log_file=`+dir+`/vsftpd.log
`), 0o644); err != nil {
		return err
	}
	if err := os.MkdirAll("/var/run/vsftpd/empty", 0o755); err != nil {
		return err
	}
	if _, err := l.exec(l.server, nil, "nginx", "-c", nginx); err != nil {
		return err
	}
	if _, err := l.exec(l.server, nil, "vsftpd", vsftpd); err != nil {
		return err
	}
	// Both listen before the first fetch.
	for i := 0; ; i++ {
		out, _ := l.exec(l.server, nil, "ss", "-Hltn")
		if strings.Contains(out, l.serverAddr+":80") && strings.Contains(out, l.serverAddr+":21") {
			return nil
		}
		if i == 50 {
			return fmt.Errorf("nginx or vsftpd not listening on %s: %s", l.serverAddr, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// fetch fetches the file once over proto into the client's tmpfs, times
// it, checks its SHA-256 and removes it.
func (l *transferLab) fetch(proto string, sizeMB int, sum [sha256.Size]byte) (*Transfer, error) {
	got := filepath.Join("/dev/shm", "msr-transfer-"+l.name)
	defer os.Remove(got)
	os.Remove(got)
	start := time.Now()
	var err error
	switch proto {
	case "http":
		_, err = l.exec(l.client, nil, "curl", "-sS", "--fail", "-o", got, "http://"+l.serverAddr+"/file.bin")
	case "ftp":
		// The ftp client, passive, anonymous; it exits 0 even when a
		// transfer fails, so the file's size and sum say whether it
		// worked.
		script := "user anonymous msr\nbinary\nget file.bin " + got + "\nbye\n"
		_, err = l.exec(l.client, strings.NewReader(script), "ftp", "-n", "-p", l.serverAddr)
	}
	took := time.Since(start)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(got)
	if err != nil {
		return nil, fmt.Errorf("nothing arrived: %w", err)
	}
	return &Transfer{Seconds: took.Seconds(), Mbps: float64(len(data)) * 8 / took.Seconds() / 1e6,
		Intact: len(data) == sizeMB<<20 && sha256.Sum256(data) == sum}, nil
}

// WriteText prints the summary and every transfer.
func (r *TransferResult) WriteText(w io.Writer) {
	fmt.Fprintf(w, "Seed 002's transfers: %d MB × %d per router and protocol, interleaved; %.0f s\n", r.Options.SizeMB, r.Options.Count, r.Seconds)
	fmt.Fprintf(w, "%-6s %-5s %10s %10s %10s %12s %7s\n", "DUT", "PROTO", "MEDIAN S", "MIN S", "MAX S", "MEDIAN MBIT/S", "INTACT")
	for _, s := range r.Summary {
		fmt.Fprintf(w, "%-6s %-5s %10.3f %10.3f %10.3f %12.0f %4d/%d\n", s.DUT, s.Protocol, s.MedianSeconds, s.MinSeconds, s.MaxSeconds, s.MedianMbps, s.Intact, r.Options.Count)
	}
}

// WriteReport writes report.json, the plot and report.md into dir.
func (r *TransferResult) WriteReport(dir, command string) error {
	return writeReport(r, dir, "Seed 002's transfers", command, r.Machine)
}

func (r *TransferResult) setFigures(p []Plot) { r.Figures = p }

// Plots draws each router's and protocol's transfer times, round by
// round.
func (r *TransferResult) Plots(dir string) ([]Plot, error) {
	f := newFigure("transfers.png", fmt.Sprintf("Seed 002's transfers: %d MB, round by round", r.Options.SizeMB), "round", "transfer time (s)")
	for _, dut := range r.Options.DUTs {
		for _, proto := range r.Options.Protocols {
			var xys plotter.XYs
			for _, t := range r.Transfers {
				if t.DUT == dut && t.Protocol == proto {
					xys = append(xys, plotter.XY{X: float64(t.Round), Y: t.Seconds})
				}
			}
			if err := f.line(dut+" "+strings.ToUpper(proto), dut, xys, proto == "ftp"); err != nil {
				return nil, err
			}
		}
	}
	return saveFigures(dir, []*figure{f})
}
