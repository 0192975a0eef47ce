package egress

import (
	"context"
	"net/netip"
	"testing"

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
