package lab

import (
	"errors"
	"net"
	"time"

	"golang.org/x/sys/unix"

	"github.com/msr-router/msr/internal/netns"
)

// Raw runs f with a raw packet socket on a host's interface, as that host
// would send hand-made frames (a hostile one: forged control frames,
// random bytes). send writes one whole frame, waiting while the
// interface's queue is full.
func Raw(labName, host, iface string, f func(ifi *net.Interface, send func([]byte) error) error) error {
	return netns.Do(Namespace(labName, host), func() error {
		ifi, err := net.InterfaceByName(iface)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: ifi.Index}); err != nil {
			return err
		}
		return f(ifi, func(b []byte) error {
			for {
				err := unix.Send(fd, b, 0)
				if errors.Is(err, unix.ENOBUFS) || errors.Is(err, unix.EAGAIN) {
					time.Sleep(50 * time.Microsecond)
					continue
				}
				return err
			}
		})
	})
}
