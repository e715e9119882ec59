import { number } from 'yup';

/**
 * A whole number from `min` to `max`, every failure (not a number, not whole,
 * out of range) with the one message that says so: `<name> must be a whole
 * number[ of <unit>] from <min> to <max>`.
 */
export function wholeNumber(name: string, min: number, max: number, unit?: string) {
  const message = `${name} must be a whole number${unit ? ` of ${unit}` : ''} from ${min} to ${max}`;
  return number().typeError(message).integer(message).min(min, message).max(max, message);
}
