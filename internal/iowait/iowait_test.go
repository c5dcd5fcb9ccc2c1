package iowait

import "testing"

// The kernel's u8 arithmetic: the key and the starved count wrap at 256, a tie keeps the top.
func TestIOWaitU8(t *testing.T) {
	if got := Key(1, 3); got != 19 {
		t.Errorf("Key(1, 3) = %d, want 19", got)
	}
	if got := Key(16, 2); got != 2 {
		t.Errorf("Key(16, 2) = %d, want 2 ((16<<4)+2 in a u8)", got)
	}
	if got := Starve(false, 255); got != 0 {
		t.Errorf("Starve(false, 255) = %d, want 0", got)
	}
	if got := Starve(true, 7); got != 0 {
		t.Errorf("Starve(true, 7) = %d, want 0", got)
	}
	if AtHead(0, true) || !AtHead(0, false) || !AtHead(1, true) {
		t.Error("AtHead: the head is for a priority or a waiter that sent nothing")
	}
	if UpdateTop(5, 5, 3, 1) != 1 || UpdateTop(6, 5, 3, 1) != 3 {
		t.Error("UpdateTop: only a higher key takes the top")
	}
}
