package router

//go:generate go tool bpf2go -target bpfel -cflags "-O2 -g -Wall -Werror -mcpu=v3 -I/usr/include/x86_64-linux-gnu" -type rt_nhgroup -type rt_nexthop -type rt_port -type rt_vlan -type rt_urpf -type rt_neigh_key -type rt_neigh6_key -type rt_neigh -type rt_acl_rule -type rt_config -type rt_slow_meta -type rt_stats -type msr_cap -type rt_slow -type rt_drop -type flow_seed -type msr_ethertype -type dist_wire -type rt_limit -type rt_local_kind -type rt_acl_action -type ip6_limit -type msr_infra -type msr_infra_limit -type xdp_md rtxdp ../bpf/router.bpf.c -- -I../bpf
