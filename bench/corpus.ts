/**
 * Realistic short memories for the benchmarks, generated deterministically: persona facts
 * and conversation turns of the kind agents store, with names, places, dates and numbers,
 * and questions of the kind they ask of them. The same index always gives the same text.
 */
import { mulberry32 } from '../scripts/lib/mulberry32.js';

const names = ['Anna', 'Ravi', 'Mei', 'Jonas', 'Fatima', 'Lucas', 'Sofia', 'Kenji', 'Amara', 'Diego', 'Noor', 'Elena', 'Tomasz', 'Priya', 'Omar', 'Hana'];
const places = ['Lisbon', 'Oslo', 'Kyoto', 'Denver', 'Nairobi', 'Porto', 'Krakow', 'Austin', 'Seoul', 'Cape Town', 'Hanoi', 'Lyon', 'Tbilisi', 'Quito', 'Perth', 'Bergen'];
const things = ['the blue bicycle', 'a sourdough starter', 'the piano lessons', 'the garden shed', 'a used Volvo', 'the vinyl records', 'the climbing shoes', 'a rescue greyhound', 'the espresso machine', 'the watercolour set', 'a 3D printer', 'the camping stove'];
const foods = ['ramen', 'green tea', 'dark chocolate', 'falafel', 'oat milk', 'spicy curry', 'mango lassi', 'black coffee', 'sushi', 'lentil soup', 'goat cheese', 'plum jam'];
const activities = ['hiking', 'swimming', 'chess', 'pottery', 'birdwatching', 'salsa dancing', 'rock climbing', 'knitting', 'running', 'photography', 'sailing', 'baking'];
const days = ['Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday', 'Sunday'];
const months = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];

const facts: Array<(r: (n: number) => number) => string> = [
  (r) => `I live in ${places[r(16)]} with my partner ${names[r(16)]}.`,
  (r) => `My sister ${names[r(16)]} works as a nurse in ${places[r(16)]}.`,
  (r) => `I am allergic to ${foods[r(12)]}, so please never suggest it.`,
  (r) => `I prefer ${foods[r(12)]} over ${foods[r(12)]} in the morning.`,
  (r) => `We adopted ${things[r(12)]} last ${months[r(12)]}.`,
  (r) => `My dentist appointment is on ${days[r(7)]} the ${1 + r(28)}th at ${8 + r(9)}:30.`,
  (r) => `I have been doing ${activities[r(12)]} every ${days[r(7)]} for ${2 + r(9)} years.`,
  (r) => `Invoice ${10000 + r(89999)} from ${names[r(16)]}'s studio is due on ${months[r(12)]} ${1 + r(28)}.`,
  (r) => `My flight to ${places[r(16)]} leaves at ${5 + r(18)}:${10 + r(49)} on ${days[r(7)]}.`,
  (r) => `${names[r(16)]} said the budget for the ${places[r(16)]} trip is ${200 + r(1800)} euros.`,
];
const turns: Array<(r: (n: number) => number) => string> = [
  (r) => `User: Can you remind me what ${names[r(16)]} recommended for dinner? Assistant: ${names[r(16)]} suggested ${foods[r(12)]} at the place near the station.`,
  (r) => `User: I finally sold ${things[r(12)]} for ${20 + r(480)} dollars. Assistant: Congratulations, that was quick.`,
  (r) => `User: We are thinking about moving to ${places[r(16)]} next ${months[r(12)]}. Assistant: Noted, I will keep an eye on rentals there.`,
  (r) => `User: My son started ${activities[r(12)]} lessons on ${days[r(7)]}. Assistant: That sounds fun, how did the first one go?`,
  (r) => `User: Please book the usual table for ${2 + r(6)} people on ${days[r(7)]}. Assistant: Done, it is under ${names[r(16)]}.`,
  (r) => `User: The password hint for the router is the name of our first ${things[r(12)].replace(/^(the|a) /, '')}. Assistant: Got it.`,
];
const questions: Array<(r: (n: number) => number) => string> = [
  () => `where does my sister work`,
  () => `what am I allergic to`,
  (r) => `when is my flight to ${places[r(16)]}`,
  (r) => `what did ${names[r(16)]} recommend for dinner`,
  (r) => `how much did I sell ${things[r(12)]} for`,
  (r) => `which day are the ${activities[r(12)]} lessons`,
  (r) => `when is invoice ${10000 + r(89999)} due`,
  () => `what is the budget for the trip`,
  () => `do I prefer tea or coffee in the morning`,
  () => `who is my partner and where do we live`,
];

/** A small deterministic generator of integers below n, seeded by the index. */
function rng(seed: number): (n: number) => number {
  const next = mulberry32(seed * 2654435761);
  return (n) => Math.floor(next() * n);
}

/** Memory number `i`: two in three are persona facts, one in three a conversation turn. */
export function memoryText(i: number): string {
  const r = rng(i + 1);
  return i % 3 === 2 ? turns[r(turns.length)](r) : facts[r(facts.length)](r);
}

/** Question number `i`, the kind an agent asks of its memories. */
export function questionText(i: number): string {
  const r = rng(1_000_003 + i);
  return questions[r(questions.length)](r);
}
