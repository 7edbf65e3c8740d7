package plan

import "testing"

func TestParseMerge(t *testing.T) {
	for in, want := range map[string]Merge{"": MergeAuto, "auto": MergeAuto, " Proxy ": MergeProxy, "SERVER": MergeServer} {
		if got, ok := ParseMerge(in); !ok || got != want {
			t.Errorf("ParseMerge(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	if _, ok := ParseMerge("both"); ok {
		t.Error(`ParseMerge("both") accepted`)
	}
}
