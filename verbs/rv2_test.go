package verbs

import "testing"

// TestSendVsCloseConcurrentManualPIO is TestSendVsCloseConcurrent with ManualPIO (the senders
// drive the PIO chips, SDMA sends wait in the PIO drain by yielding): every packet is accepted,
// on the wire once in its flow's order and told once, or refused with ErrClosed and seen
// nowhere; no Send that starts after Close returned is accepted; every Drain returns.
func TestSendVsCloseConcurrentManualPIO(t *testing.T) {
	sendVsClose(t, Config{ManualPIO: true}, 6, 3, 150, 6)
}
