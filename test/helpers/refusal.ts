import { ApiError } from '../../common/errors.js';

/** The ApiError `fn` throws; fails the test when it throws nothing or something else. */
export function refusal(fn: () => unknown): ApiError {
  try {
    fn();
  } catch (err) {
    if (err instanceof ApiError) return err;
    throw err;
  }
  throw new Error('expected a refusal');
}
