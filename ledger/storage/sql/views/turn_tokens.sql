-- One row per agent turn and its tokens: the one definition of "tokens" that every view, guard and
-- screen uses. tokens = input + output + cache_creation + cache_read: every token the model read or
-- wrote in the turn (what the token_budget guard counts); cache = cache_creation + cache_read.
-- prompt = input + cache: the input tokens the model read, cache included (what a price tier and
-- the context window count). model and reported_cost_usd are what the agent said (turn_costs).
SELECT
  session_id,
  iteration,
  seq,
  tokens.input AS input,
  tokens.output AS output,
  tokens.cache_creation + tokens.cache_read AS cache,
  tokens.input + tokens.output + tokens.cache_creation + tokens.cache_read AS tokens,
  tokens.cache_read AS cache_read,
  tokens.cache_creation AS cache_write,
  tokens.input + tokens.cache_creation + tokens.cache_read AS prompt,
  model,
  cost_usd AS reported_cost_usd
FROM events
WHERE type = 'agent_turn'
