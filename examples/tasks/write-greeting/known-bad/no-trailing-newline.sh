#!/bin/bash
printf 'Hello, rollout!\nRewards are earned.' > /app/greeting.txt
