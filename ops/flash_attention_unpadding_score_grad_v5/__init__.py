"""FlashAttentionUnpaddingScoreGradV5 (training backward of TND flash attention) on the chip model."""
