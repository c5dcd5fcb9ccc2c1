package usdma

import "testing"

// TestStateStringsOfHugeValues: a state past the int32 range is named by its uint32 value on
// every GOARCH; itoa(int(s)) named QState(4294967295) and CompState(4294967295) by -1 on 386
// (GOARCH=386 go test -exec qemu-i386 fails before).
func TestStateStringsOfHugeValues(t *testing.T) {
	if got := QState(4294967295).String(); got != "QState(4294967295)" {
		t.Errorf("QState(MaxUint32).String() = %q", got)
	}
	if got := CompState(4294967295).String(); got != "CompState(4294967295)" {
		t.Errorf("CompState(MaxUint32).String() = %q", got)
	}
}
