package traffic

//go:generate go tool bpf2go -target bpfel -cflags "-O2 -g -Wall -Werror -mcpu=v3 -I/usr/include/x86_64-linux-gnu" -type gen_flow -type gen_dst -type bench_payload -type gen_len -type xdp_md trafficgen ../bpf/trafficgen.bpf.c -- -I../bpf
//go:generate go tool bpf2go -target bpfel -cflags "-O2 -g -Wall -Werror -mcpu=v3 -I/usr/include/x86_64-linux-gnu" -type sink_flow -type sink_stats trafficsink ../bpf/trafficsink.bpf.c -- -I../bpf
