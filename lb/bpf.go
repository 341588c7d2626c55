package lb

//go:generate go tool bpf2go -target bpfel -cflags "-O2 -g -Wall -Werror -mcpu=v3 -I/usr/include/x86_64-linux-gnu" -type lb_port -type lb_config -type lb_table_meta -type lb_slot -type lb_egress -type lb_port_stats -type lb_flowlet -type msr_cap -type lb_module -type lb_drop -type lb_port_role -type lb_mode -type flow_seed -type msr_ethertype -type lb_limit -type lb_addr_flag -type lb_police_class -type lb_police_rate -type lb_police_bucket -type lb_police_counts -type lb_addr6 -type in6_addr -type ip6_limit -type xdp_md lbxdp ../bpf/lb.bpf.c -- -I../bpf
