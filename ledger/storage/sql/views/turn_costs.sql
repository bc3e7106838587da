-- One row per agent turn and its cost in USD: the one definition of "cost" that every view, guard and
-- screen uses. cost_usd = the cost the agent reported for the turn when it reported one, else its
-- tokens (turn_tokens) x its model's per-token prices (model_prices, from genai-prices): input,
-- output, cache reads and cache writes each at their own rate, in the price band of the turn's input
-- tokens (long-context prices). NULL when neither is known (no model, one without a known price, or
-- no tokens: an agent that reports none, such as Cursor's, spent an unknown amount, not nothing).
-- context_window is the model's, as the price library knows it (NULL: not known); context_used is
-- the turn's last request's input tokens (cache included) over it: how full the context was.
-- The price band is that with the greatest `above` below the turn's request size: each band reaches
-- up to the next one's `above` (an ASOF join, written as a plain join for every engine). A turn is
-- often several requests summed (every tool call is one), and a band is a request's: the size is
-- the turn's last request's input (context_tokens, the largest as a context grows) where the agent
-- said it, else the whole prompt (docs/cost.md).
SELECT
  t.session_id,
  t.iteration,
  t.seq,
  t.model,
  t.input,
  t.output,
  t.cache,
  t.tokens,
  t.prompt,
  coalesce(t.reported_cost_usd,
           CASE WHEN t.tokens > 0 THEN t.input * p.input + t.output * p.output
                + t.cache_read * p.cache_read + t.cache_write * p.cache_write END) AS cost_usd,
  t.reported_cost_usd IS NOT NULL AS cost_reported,
  p.context_window,
  t.context_tokens,
  t.context_tokens / p.context_window AS context_used
FROM turn_tokens t
LEFT JOIN (SELECT *, lead(above) OVER (PARTITION BY model ORDER BY above) AS next_above
           FROM model_prices) p
  ON t.model = p.model
  AND coalesce(t.context_tokens, t.prompt) > p.above
  AND (p.next_above IS NULL OR coalesce(t.context_tokens, t.prompt) <= p.next_above)
