package bench

//go:generate go tool bpf2go -target bpfel -cflags "-O2 -g -Wall -Werror -mcpu=v3 -I/usr/include/x86_64-linux-gnu" -type xdp_md minfwd ../bpf/minfwd.bpf.c -- -I../bpf
//go:generate go tool bpf2go -target bpfel -cflags "-O2 -g -Wall -Werror -mcpu=v3 -I/usr/include/x86_64-linux-gnu" -type memlat_cfg memlat ../bpf/memlat.bpf.c -- -I../bpf
//go:generate go tool bpf2go -target bpfel -cflags "-O2 -g -Wall -Werror -mcpu=v3 -I/usr/include/x86_64-linux-gnu" -type fib_vlan -type fib_outcome xdpfib ../bpf/xdpfib.bpf.c -- -I../bpf
//go:generate go tool bpf2go -target bpfel -cflags "-O2 -g -Wall -Werror -mcpu=v3 -I/usr/include/x86_64-linux-gnu" -type lk_cfg -type lk_what -type xdp_md lookup ../bpf/lookup.bpf.c -- -I../bpf
