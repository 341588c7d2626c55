package lab

//go:generate go tool bpf2go -target bpfel -cflags "-O2 -g -Wall -Werror -mcpu=v3 -I/usr/include/x86_64-linux-gnu" xdppass ../bpf/xdppass.bpf.c -- -I../bpf
//go:generate go tool bpf2go -target bpfel -cflags "-O2 -g -Wall -Werror -mcpu=v3 -I/usr/include/x86_64-linux-gnu" xdpswitch ../bpf/xdpswitch.bpf.c -- -I../bpf
