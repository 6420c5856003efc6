#!/bin/bash
printf 'Hello, rollout!\nRewards are earned.\n' > /app/greeting.txt
