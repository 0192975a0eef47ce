package egress

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stockade/stockade/domain"
	"github.com/stockade/stockade/internal/gate"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

// networks is a lister whose only networks are given.
type networks []dockerapi.Network

func (n networks) NetworkList(context.Context, dockerapi.Filters) ([]dockerapi.Network, error) {
	return n, nil
}

func subnets(cidrs ...string) networks {
	var n networks
	for _, c := range cidrs {
		n = append(n, dockerapi.Network{IPAM: dockerapi.IPAM{Config: []dockerapi.IPAMConfig{{Subnet: c}}}})
	}
	return n
}

func TestFreeSubnet(t *testing.T) {
	for _, tt := range []struct {
		pool string
		bits int
		eng  networks
		want string // "" for an error
	}{
		{"10.9.8.0/24", 24, subnets(), "10.9.8.0/24"},
		{"10.9.8.0/24", 24, subnets("10.9.8.128/25"), ""},
		{"10.9.8.0/24", 24, subnets("10.0.0.0/8"), ""},
		{"10.9.0.0/23", 24, subnets("10.9.0.0/24"), "10.9.1.0/24"},
		{"10.9.0.0/23", 24, subnets("10.9.1.0/24"), "10.9.0.0/24"},
		{"10.9.0.0/23", 24, subnets("10.9.0.0/24", "10.9.1.7/32"), ""},
		{"10.9.8.0/27", 28, subnets("10.9.8.0/28"), "10.9.8.16/28"},
		{"10.9.8.0/28", 24, subnets(), ""}, // wider than the pool
	} {
		pool := netip.MustParsePrefix(tt.pool)
		got, err := FreeSubnet(context.Background(), tt.eng, pool, tt.bits, "o")
		if tt.want == "" && err == nil || tt.want != "" && (err != nil || got.String() != tt.want) {
			t.Errorf("FreeSubnet(pool %s, /%d, used %v) = %v, %v; want %q", tt.pool, tt.bits, tt.eng, got, err, tt.want)
		}
	}
	// The seed's hash picks the first slot tried, so seeds spread.
	pool := netip.MustParsePrefix(DefaultPool)
	seen := map[string]bool{}
	for _, o := range []string{"a", "b", "c", "d"} {
		got, err := FreeSubnet(context.Background(), subnets(), pool, SubnetBits, o)
		if err != nil || !pool.Contains(got.Addr()) || got.Bits() != SubnetBits {
			t.Errorf("FreeSubnet(seed %s) = %v, %v; want a /%d of %s", o, got, err, SubnetBits, pool)
		}
		seen[got.String()] = true
	}
	if len(seen) < 2 {
		t.Errorf("four seeds all got %v; want their hashes to spread them", seen)
	}
}

// TestSince: Take returns exactly the records made since the last one,
// counting what the ring dropped.
func TestSince(t *testing.T) {
	rec := func(hosts ...string) []domain.EgressRecord {
		var out []domain.EgressRecord
		for _, h := range hosts {
			out = append(out, domain.EgressRecord{Host: h})
		}
		return out
	}
	for _, tt := range []struct {
		name     string
		dump     gate.LogDump
		seen     int64
		want     []string
		wantLost int64
	}{
		{"first", gate.LogDump{Records: rec("a", "b")}, 0, []string{"a", "b"}, 0},
		{"new only", gate.LogDump{Records: rec("a", "b", "c")}, 2, []string{"c"}, 0},
		{"nothing new", gate.LogDump{Records: rec("a", "b")}, 2, nil, 0},
		{"ring wrapped", gate.LogDump{Records: rec("c", "d", "e"), Dropped: 2}, 3, []string{"d", "e"}, 0},
		{"more than kept", gate.LogDump{Records: rec("e", "f"), Dropped: 4}, 1, []string{"e", "f"}, 3},
	} {
		got, lost := since(tt.dump, tt.seen)
		var hosts []string
		for _, r := range got {
			hosts = append(hosts, r.Host)
		}
		if len(hosts) != len(tt.want) || lost != tt.wantLost {
			t.Errorf("%s: since = %v, lost %d; want %v, lost %d", tt.name, hosts, lost, tt.want, tt.wantLost)
			continue
		}
		for i := range hosts {
			if hosts[i] != tt.want[i] {
				t.Errorf("%s: since = %v; want %v", tt.name, hosts, tt.want)
			}
		}
	}
}

// TestHostAddrs: the bridges' gateways, this machine's addresses and a
// TCP engine's, each once; nothing the gate refuses anyway.
func TestHostAddrs(t *testing.T) {
	eng := networks{
		{Name: "bridge", Driver: "bridge", IPAM: dockerapi.IPAM{Config: []dockerapi.IPAMConfig{{Subnet: "172.17.0.0/16", Gateway: "172.17.0.1"}}}},
		{Name: "user", Driver: "bridge", IPAM: dockerapi.IPAM{Config: []dockerapi.IPAMConfig{{Subnet: "172.18.0.0/16"}, {Subnet: "fd00:1::/64", Gateway: "fd00:1::1/64"}}}},
		{Name: "lan", Driver: "macvlan", IPAM: dockerapi.IPAM{Config: []dockerapi.IPAMConfig{{Subnet: "192.168.9.0/24", Gateway: "192.168.9.254"}}}},
		{Name: "dup", Driver: "bridge", IPAM: dockerapi.IPAM{Config: []dockerapi.IPAMConfig{{Subnet: "172.17.0.0/16", Gateway: "172.17.0.1"}}}},
	}
	got, err := HostAddrs(context.Background(), eng, "tcp://203.0.113.9:2376")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"172.17.0.1/32", "172.18.0.1/32", "fd00:1::1/128", "203.0.113.9/32"}
	ifs, _ := net.InterfaceAddrs()
	for _, a := range ifs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && !p.Addr().IsLoopback() && !p.Addr().IsLinkLocalUnicast() {
			want = append(want, netip.PrefixFrom(p.Addr(), p.Addr().BitLen()).String())
		}
	}
	set := map[string]int{}
	for _, p := range got {
		set[p.String()]++
		if a := p.Addr(); a.IsLoopback() || a.IsLinkLocalUnicast() || p.Bits() != a.BitLen() {
			t.Errorf("HostAddrs has %v", p)
		}
	}
	for _, w := range want {
		if set[w] != 1 {
			t.Errorf("HostAddrs = %v; want %s once", got, w)
		}
	}
	if set["192.168.9.254/32"] != 0 {
		t.Errorf("HostAddrs = %v; a macvlan's gateway is the LAN's router, not the host", got)
	}
	if _, err := HostAddrs(context.Background(), eng, "unix:///var/run/docker.sock"); err != nil {
		t.Errorf("HostAddrs of a local engine = %v", err)
	}
}

// TestMaxLogBytesHoldsAFullLog: the record of a full ring whose every
// field is at its bound, in the characters JSON lengthens most, as the
// gate encodes it, fits what ReadLog reads.
func TestMaxLogBytesHoldsAFullLog(t *testing.T) {
	worst := strings.Repeat(`"`, 2*gate.MaxFieldBytes) // Bound cuts it to MaxFieldBytes
	rec, cut := gate.Bound(domain.EgressRecord{Time: time.Date(2026, 12, 31, 23, 59, 59, 999999999, time.FixedZone("", -12*3600)),
		Method: worst, Host: worst, Port: worst, Addr: worst, Verdict: worst, Reason: worst, Status: -1 << 62,
		BytesUp: -1 << 63, BytesDn: -1 << 63, Duration: -1 << 63})
	if !cut {
		t.Fatal("Bound did not cut")
	}
	d := gate.LogDump{Dropped: -1 << 63, Truncated: -1 << 63}
	for range gate.DefaultLogRecords {
		d.Records = append(d.Records, rec)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(d); err != nil {
		t.Fatal(err)
	}
	if b.Len() > MaxLogBytes {
		t.Errorf("a full log of records at their bounds is %d bytes of JSON; ReadLog reads %d", b.Len(), MaxLogBytes)
	}
	t.Logf("worst full log: %d bytes (%d a record); MaxLogBytes %d", b.Len(), b.Len()/gate.DefaultLogRecords, MaxLogBytes)
}

func TestProxyEnvAt(t *testing.T) {
	if env := ProxyEnvAt("127.0.0.1:3128"); env["https_proxy"] != "http://127.0.0.1:3128" || len(env) != 4 {
		t.Errorf("ProxyEnvAt = %v", env)
	}
	if env := ProxyEnv(); env["HTTP_PROXY"] != "http://stockade-gate:3128" {
		t.Errorf("ProxyEnv = %v", env)
	}
}

func TestAddress(t *testing.T) {
	for _, tc := range []struct{ subnet, want string }{
		{"10.213.4.16/28", "10.213.4.30"},
		{"10.213.4.0/28", "10.213.4.14"},
		{"10.213.0.0/24", "10.213.0.254"},
	} {
		if got := Address(netip.MustParsePrefix(tc.subnet)); got.String() != tc.want {
			t.Errorf("Address(%s) = %v; want %s", tc.subnet, got, tc.want)
		}
	}
	if got := HostsLine(netip.MustParseAddr("10.0.0.14")); got != Alias+":10.0.0.14" {
		t.Errorf("HostsLine = %q", got)
	}
}
