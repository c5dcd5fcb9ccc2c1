package udpsink

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReceiverRunNilContext: Run refuses a nil ctx with ErrInvalid and reads nothing (a later
// Run with a real context gets the datagrams). It panicked in context.AfterFunc.
func TestReceiverRunNilContext(t *testing.T) {
	r, err := Listen(ReceiverConfig{Idle: 50 * time.Millisecond})
	require.NoError(t, err)
	defer r.Close()
	var nilCtx context.Context
	_, err = r.Run(nilCtx)
	assert.ErrorIs(t, err, ErrInvalid)
	rep, err := r.Run(context.Background())
	require.NoError(t, err)
	assert.True(t, rep.IdleTimeout, "the receiver still runs after the refusal")
}
